# Crash safety (docs/crash-safety.md): SIGKILLs a real `glimpse train letr` at varied moments
# and resumes it; heartbeat and dead-run detection. The long version is tools/crash_test.sh.
glimpse_add_test(test_crash_safety SOURCES test_crash_safety.cpp LIBS glimpse_app TIMEOUT 180 LABELS train)
add_dependencies(test_crash_safety glimpse)   # runs build/app/glimpse (GLIMPSE_BINARY_DIR)
