/* crc32: the CRC-32 (IEEE, as zlib) of a string, bit by bit and with a 256-entry table, and of a
 * 1 KiB generated buffer. Exit code: the low byte of the last CRC (non-zero on purpose). */
#include "runtime.h"

static uint32_t table[256];

static void make_table(void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[n] = c;
    }
}

static uint32_t crc32_table(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    while (n--)
        c = table[(c ^ *p++) & 0xff] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static uint32_t crc32_bitwise(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    while (n--) {
        c ^= *p++;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xEDB88320u & -(c & 1));
    }
    return ~c;
}

static uint8_t buf[1024];

int main(void)
{
    static const char text[] = "The quick brown fox jumps over the lazy dog";
    make_table();
    printf("table[1] = %08x, table[255] = %08x\n", table[1], table[255]);
    printf("crc32(\"%s\") = %08x (bitwise %08x)\n", text, crc32_table((const uint8_t *)text, strlen(text)),
           crc32_bitwise((const uint8_t *)text, strlen(text)));
    printf("crc32(\"\") = %08x\n", crc32_table((const uint8_t *)"", 0));
    for (int i = 0; i < (int)sizeof buf; i++)
        buf[i] = (uint8_t)(i * 7 + (i >> 3));
    uint32_t c = crc32_table(buf, sizeof buf);
    printf("crc32(buf[1024]) = %08x\n", c);
    return (int)(c & 0xff);
}
