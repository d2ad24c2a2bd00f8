# Data-parallel training on c10d (docs/distributed.md): launcher settings, two worker processes
# on localhost against one process on the combined batch, a dead rank, a missing rank.
glimpse_add_test(test_dist SOURCES test_dist.cpp LIBS glimpse_core TIMEOUT 300 LABELS core dist)
