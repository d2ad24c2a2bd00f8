# ConstellationNet panel (app/constellation): cluster map pixels, hover, relation, gallery, episode
# view, bad input, Training preview; offscreen (scenes rendered with renderSceneAtImageResolution).
glimpse_add_test(test_constellation_inspector SOURCES test_constellation_inspector.cpp LIBS glimpse_app TIMEOUT 300 LABELS constellation)
