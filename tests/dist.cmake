# Data-parallel training on c10d (docs/distributed.md): launcher settings, two worker processes
# on localhost against one process on the combined batch, a dead rank, a missing rank, and
# `glimpse train coat` in two processes against one (and resumed with another world size).
glimpse_add_test(test_dist SOURCES test_dist.cpp LIBS glimpse_core TIMEOUT 300 LABELS core dist train)
add_dependencies(test_dist glimpse)   # runs build/app/glimpse (GLIMPSE_BINARY_DIR)
