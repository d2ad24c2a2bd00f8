# Core I/O (core/h5, core/io, core/trace, core/runlog, core/info): HDF5 layer, checkpoints,
# traces, run logs (SWMR, with a forked writer), images and the demo scene.
glimpse_add_test(test_h5 SOURCES test_h5.cpp LIBS glimpse_core TIMEOUT 60 LABELS core io)
glimpse_add_test(test_checkpoint SOURCES test_checkpoint.cpp LIBS glimpse_core TIMEOUT 60 LABELS core io)
glimpse_add_test(test_trace SOURCES test_trace.cpp LIBS glimpse_core TIMEOUT 60 LABELS core io)
glimpse_add_test(test_runlog SOURCES test_runlog.cpp LIBS glimpse_core TIMEOUT 60 LABELS core io)
glimpse_add_test(test_image SOURCES test_image.cpp LIBS glimpse_core TIMEOUT 60 LABELS core io)
glimpse_add_test(test_video SOURCES test_video.cpp LIBS glimpse_core TIMEOUT 60 LABELS core io)
