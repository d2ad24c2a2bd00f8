# Line datasets (core/data): augmentations, Wireframe JSON loader, procedural generator.
glimpse_add_test(test_line_data SOURCES test_line_data.cpp LIBS glimpse_core TIMEOUT 120 LABELS core data)
