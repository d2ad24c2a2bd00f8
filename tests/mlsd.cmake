# M-LSD (core/models/mlsd): network, post-processing, converter parity and refusals against an
# independent torch M-LSD with random weights (Debian's /usr/bin/python3; skipped without torch).
glimpse_add_test(test_mlsd SOURCES test_mlsd.cpp LIBS glimpse_core TIMEOUT 300 LABELS mlsd letr)
glimpse_add_test(test_mlsd_cli SOURCES test_mlsd_cli.cpp LIBS glimpse_core TIMEOUT 300 LABELS mlsd letr)
add_dependencies(test_mlsd_cli glimpse)
target_compile_definitions(test_mlsd_cli PRIVATE GLIMPSE_EXE="$<TARGET_FILE:glimpse>")
# The dataset spec mlsd:LIST (core/data/mlsd_lines.h): M-LSD labels cached beside the list.
glimpse_add_test(test_mlsd_lines SOURCES test_mlsd_lines.cpp LIBS glimpse_core TIMEOUT 120 LABELS mlsd data)
