// The phrase a TOML value's type takes in an error message ("an integer"),
// one for every file the scorer reads as TOML. g++ files only: toml++ does
// not compile under nvcc.
#pragma once

#include <toml++/toml.h>

namespace scorer {

const char* toml_type_phrase(toml::node_type t);

}  // namespace scorer
