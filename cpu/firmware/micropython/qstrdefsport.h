/* No port-specific qstrs. */
