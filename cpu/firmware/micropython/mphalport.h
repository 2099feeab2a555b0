/* The machine has no timers and no interrupts: the HAL is the console (main.c). */
static inline mp_uint_t mp_hal_ticks_ms(void) { return 0; }
static inline void mp_hal_set_interrupt_char(char c) { (void)c; }
/* No pins: the core's generic pin API (extmod/virtpin.h, not in the sources used) is not wanted. */
#define mp_hal_pin_obj_t void *
