// toml++ as every file the scorer reads as TOML includes it, and the phrase a
// TOML value's type takes in an error message ("an integer"). g++ files only:
// toml++ does not compile under nvcc.
#pragma once

// toml++'s parser is compiled once, in toml_types.cpp, rather than in every
// file that parses: each of those then compiles in half the time. Nothing
// writes TOML, so its formatters are left out. Every file that includes
// toml++ must see the same settings: include it through this header only.
#define TOML_HEADER_ONLY 0
#define TOML_ENABLE_FORMATTERS 0
#include <toml++/toml.h>

namespace scorer {

const char* toml_type_phrase(toml::node_type t);

}  // namespace scorer
