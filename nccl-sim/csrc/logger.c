/* NCCL's logger is C-variadic (ncclDebugLogger_t); stable Rust cannot define such a
 * function, so nccl-sim's is these few lines of C: format, then hand the text to Rust. */
#include <stdarg.h>
#include <stdio.h>

void nccl_sim_log_line(int level, unsigned long flags, const char *file, int line,
                       const char *text);

void nccl_sim_logger(int level, unsigned long flags, const char *file, int line,
                     const char *fmt, ...) {
    char text[4096];
    va_list args;
    va_start(args, fmt);
    vsnprintf(text, sizeof text, fmt ? fmt : "", args);
    va_end(args);
    nccl_sim_log_line(level, flags, file, line, text);
}
