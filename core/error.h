#pragma once
#include <stdexcept>
#include <string>

namespace glimpse {

// Every failure a user can cause (bad file, bad shape, bad argument) is reported as an
// Error whose message names the file or the argument and says what is wrong with it.
class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

} // namespace glimpse
