// The one table printer: the run table, the diff and the check table all print
// through it. Columns are as wide as their widest cell, counted in characters
// on screen (so "µ", two bytes of UTF-8, counts once), two spaces apart, each
// left- or right-aligned; the last column is not padded and no line ends in
// spaces.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace scorer {

class TextTable {
 public:
  enum class Align { left, right };
  // align: one per column, or empty for all left-aligned.
  explicit TextTable(std::vector<std::string> header, std::vector<Align> align = {});
  // A row of as many cells as the header has (throws std::invalid_argument otherwise).
  void add(std::vector<std::string> row);
  void print(std::ostream& os) const;

 private:
  std::vector<std::vector<std::string>> rows_;  // the header first
  std::vector<Align> align_;
};

// One number through a printf format ("%.2f", "%+.1f%%"): the formatting
// helper the printers share.
std::string format_number(const char* printf_format, double x);
// Characters on screen of UTF-8 text.
size_t display_width(const std::string& s);

}  // namespace scorer
