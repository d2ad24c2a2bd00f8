# File integrity and resource errors (docs/integrity.md): bit flips in checkpoints, traces and
# episodes (forked loaders), full disk (RLIMIT_FSIZE), read-only folders, files replaced while
# open, huge images and videos.
glimpse_add_test(test_integrity SOURCES test_integrity.cpp LIBS glimpse_core TIMEOUT 300 LABELS core io)
