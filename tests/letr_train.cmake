# LETR training (core/models/letr/{loss,train}, core/train): matcher and losses, optimizer,
# tiny training runs (loss decreases, resume equals an uninterrupted run).
glimpse_add_test(test_letr_loss SOURCES test_letr_loss.cpp LIBS glimpse_core TIMEOUT 60 LABELS letr train)
glimpse_add_test(test_letr_train SOURCES test_letr_train.cpp LIBS glimpse_core TIMEOUT 300 LABELS letr train)
