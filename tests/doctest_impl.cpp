// doctest's implementation, compiled once and linked into both test binaries
// (cpu_main.cpp and gpu_main.cpp hold their mains).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
