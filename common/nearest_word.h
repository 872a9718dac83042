// "Did you mean ...?" for a mistyped word: the candidate at the smallest
// edit distance (optimal string alignment: insert, delete, replace, or swap
// two neighbours, each 1), when it is near enough to be a typo. Used for
// subcommands and flags (cli/unknown_words.h).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace brook {

size_t EditDistance(std::string_view a, std::string_view b);

// The nearest candidate within max(1, size/3) edits of `word` (2 for words
// of 6 to 8 characters); the first of equals; "" if none is that near.
std::string NearestWord(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace brook
