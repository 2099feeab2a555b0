/* py/modsys.c includes extmod/modplatform.h, which the core-only sources (py/, shared/) lack. It
 * needs none of its macros here: sys.platform and sys.implementation come from mpconfigport.h and
 * py/mpconfig.h. */
#ifndef MICROPY_INCLUDED_EXTMOD_MODPLATFORM_H
#define MICROPY_INCLUDED_EXTMOD_MODPLATFORM_H
#endif
