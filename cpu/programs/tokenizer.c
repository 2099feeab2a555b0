/* tokenizer: a table-driven state machine (a DFA with maximal munch) that splits an expression into
 * identifiers, numbers, operators and bad characters; prints the tokens, counts, and the sum of the
 * numbers. */
#include "runtime.h"

enum { C_LETTER, C_DIGIT, C_SPACE, C_EQ, C_CMP, C_OP, C_OTHER, N_CLASSES };
enum { S_START, S_IDENT, S_NUMBER, S_OP1, S_OP, S_BAD, N_STATES, REJECT = -1 };

static const signed char NEXT[N_STATES][N_CLASSES] = {
    /*            letter   digit     space    '='    '<>!'   op     other */
    [S_START] = {S_IDENT, S_NUMBER, S_START, S_OP1, S_OP1, S_OP, S_BAD},
    [S_IDENT] = {S_IDENT, S_IDENT, REJECT, REJECT, REJECT, REJECT, REJECT},
    [S_NUMBER] = {REJECT, S_NUMBER, REJECT, REJECT, REJECT, REJECT, REJECT},
    [S_OP1] = {REJECT, REJECT, REJECT, S_OP, REJECT, REJECT, REJECT},
    [S_OP] = {REJECT, REJECT, REJECT, REJECT, REJECT, REJECT, REJECT},
    [S_BAD] = {REJECT, REJECT, REJECT, REJECT, REJECT, REJECT, REJECT},
};
static const char *const KIND[N_STATES] = {"?", "ID", "NUM", "OP", "OP", "BAD"};

static unsigned char class_of[128];

static void init_classes(void)
{
    for (int c = 0; c < 128; c++)
        class_of[c] = C_OTHER;
    for (int c = 'a'; c <= 'z'; c++)
        class_of[c] = class_of[c - 'a' + 'A'] = C_LETTER;
    class_of['_'] = C_LETTER;
    for (int c = '0'; c <= '9'; c++)
        class_of[c] = C_DIGIT;
    class_of[' '] = class_of['\t'] = class_of['\n'] = C_SPACE;
    class_of['='] = C_EQ;
    class_of['<'] = class_of['>'] = class_of['!'] = C_CMP;
    const char *ops = "+-*/();,";
    for (; *ops; ops++)
        class_of[(unsigned char)*ops] = C_OP;
}

int main(void)
{
    static const char input[] = "x1 = 42 + foo_bar*(7-y) ; if (a<=b) z != 10 @ end==3 >= 99\n"
                                "while(n>0) n = n - 1; 12ab # !x <> 5";
    int counts[N_STATES] = {0};
    unsigned sum = 0;
    init_classes();
    const char *p = input;
    int ntokens = 0;
    while (*p) {
        int state = S_START;
        const char *start = p;
        while (*p) {
            int next = NEXT[state][class_of[(unsigned char)*p & 127]];
            if (next == REJECT)
                break;
            state = next;
            p++;
            if (state == S_START)
                start = p; /* skipped white space */
        }
        if (state == S_START)
            break; /* only white space was left */
        int len = (int)(p - start);
        printf("%s(", KIND[state]);
        for (int i = 0; i < len; i++)
            putchar(start[i]);
        printf(")%c", ++ntokens % 8 ? ' ' : '\n');
        counts[state]++;
        if (state == S_NUMBER) {
            unsigned v = 0;
            for (int i = 0; i < len; i++)
                v = v * 10 + (unsigned)(start[i] - '0');
            sum += v;
        }
    }
    printf("\ntokens %d: ids %d numbers %d operators %d bad %d; sum of numbers %u\n", ntokens, counts[S_IDENT],
           counts[S_NUMBER], counts[S_OP1] + counts[S_OP], counts[S_BAD], sum);
    return 0;
}
