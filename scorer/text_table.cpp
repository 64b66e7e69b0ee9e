#include "scorer/text_table.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

namespace scorer {

TextTable::TextTable(std::vector<std::string> header, std::vector<Align> align) : align_(std::move(align)) {
  if (align_.empty()) align_.assign(header.size(), Align::left);
  if (align_.size() != header.size()) throw std::invalid_argument("TextTable: one alignment per column");
  rows_.push_back(std::move(header));
}

void TextTable::add(std::vector<std::string> row) {
  if (row.size() != rows_[0].size())
    throw std::invalid_argument("TextTable: a row of " + std::to_string(row.size()) + " cells in a table of " +
                                std::to_string(rows_[0].size()) + " columns");
  rows_.push_back(std::move(row));
}

void TextTable::print(std::ostream& os) const {
  std::vector<size_t> width(align_.size(), 0);
  for (const auto& row : rows_)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], display_width(row[c]));
  for (const auto& row : rows_) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      const std::string fill(c + 1 == row.size() && align_[c] == Align::left ? 0 : width[c] - display_width(row[c]),
                             ' ');
      line += (c ? "  " : "") + (align_[c] == Align::right ? fill + row[c] : row[c] + fill);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    os << line << "\n";
  }
}

std::string format_number(const char* printf_format, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, printf_format, x);
  return buf;
}

size_t display_width(const std::string& s) {
  return size_t(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xc0) != 0x80; }));
}

}  // namespace scorer
