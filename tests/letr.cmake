# LETR (core/models/letr): model, trace and checkpoint/converter suites. Small configs; the
# converter checks run Debian's /usr/bin/python3 and skip when it has no torch.
glimpse_add_test(test_letr_model SOURCES test_letr_model.cpp LIBS glimpse_core TIMEOUT 300 LABELS letr)
glimpse_add_test(test_letr_trace SOURCES test_letr_trace.cpp LIBS glimpse_core TIMEOUT 300 LABELS letr)
glimpse_add_test(test_letr_checkpoint SOURCES test_letr_checkpoint.cpp LIBS glimpse_core TIMEOUT 300 LABELS letr)
# LETR's mlsd_tiny backbone (issue 51 part 3): shapes, parity with M-LSD's encoder, frozen
# weights under training, round trip.
glimpse_add_test(test_letr_mlsd_backbone SOURCES test_letr_mlsd_backbone.cpp LIBS glimpse_core TIMEOUT 120 LABELS letr mlsd)
