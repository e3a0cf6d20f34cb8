// Library logging: silent unless the application installs a sink (cbl_log_set). Never stderr.
#pragma once

namespace cacheblend {

enum class log_level { debug = 0, info = 1, warn = 2, error = 3 };
using log_sink = void (*)(int level, const char* message, void* user);

void log_set_sink(log_sink fn, void* user);
void log_write(log_level level, const char* format, ...) __attribute__((format(printf, 2, 3)));

}  // namespace cacheblend
