// The one table printer: columns as wide as their widest cell on screen,
// alignment, no trailing spaces, rows of the wrong size refused.
#include <doctest/doctest.h>

#include <sstream>
#include <stdexcept>

#include "scorer/text_table.h"

using scorer::TextTable;

TEST_CASE("text table: columns as wide as their widest cell, counted on screen") {
  TextTable t({"name", "µs", "note"}, {TextTable::Align::left, TextTable::Align::right, TextTable::Align::left});
  t.add({"a_long_name", "3.25", ""});
  t.add({"b", "112.5", "slow"});
  std::ostringstream out;
  t.print(out);
  // "µs" is two characters on screen although three bytes.
  CHECK(out.str() ==
        "name            µs  note\n"
        "a_long_name   3.25\n"
        "b            112.5  slow\n");
  CHECK(scorer::display_width("µs") == 2);
  CHECK(scorer::format_number("%+.1f%%", 0.25) == "+0.2%");
  CHECK_THROWS_AS(t.add({"too", "few"}), std::invalid_argument);
  CHECK_THROWS_AS(TextTable({"a", "b"}, {TextTable::Align::left}), std::invalid_argument);
}
