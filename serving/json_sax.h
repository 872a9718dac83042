// A JSON reader for the predict bodies' hot path: it gives the events
// nlohmann::json::sax_parse gives (strict RFC 8259, no comments, a leading
// UTF-8 byte order mark skipped, strings checked as UTF-8, numbers as
// nlohmann classifies them, a NUL byte after the value ending the input) for the texts nlohmann accepts, at several times
// its speed (its lexer copies every character into a token buffer). It does
// not explain errors: on a text nlohmann refuses it returns kSyntaxError,
// and the caller asks nlohmann for the words (errors are rare, and must read
// the same on every path).
//
// Handler: nlohmann's SAX interface (null, boolean, number_integer,
// number_unsigned, number_float, string, start_object, key, end_object,
// start_array, end_array); a handler returning false stops the read
// (kStopped). Its parse_error and binary are never called.
#pragma once

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace brook::serving::internal {

enum class SaxResult { kDone, kStopped, kSyntaxError };

template <typename Handler>
class FastJsonReader {
 public:
  FastJsonReader(std::string_view text, Handler* handler)
      : p_(text.data()), end_(text.data() + text.size()), h_(handler) {}

  SaxResult Read() {
    // nlohmann skips a UTF-8 BOM (EF BB BF) and refuses a partial one.
    if (end_ - p_ >= 1 && static_cast<unsigned char>(*p_) == 0xEF) {
      if (end_ - p_ < 3 || static_cast<unsigned char>(p_[1]) != 0xBB ||
          static_cast<unsigned char>(p_[2]) != 0xBF) {
        return SaxResult::kSyntaxError;
      }
      p_ += 3;
    }
    // Iterative: a body of a million '[' must not overflow the stack.
    std::vector<bool> in_object;  // the open containers, innermost last
    SkipSpace();
  value:
    if (p_ == end_) return SaxResult::kSyntaxError;
    switch (*p_) {
      case '{':
        ++p_;
        if (!h_->start_object(static_cast<std::size_t>(-1))) return SaxResult::kStopped;
        SkipSpace();
        if (p_ != end_ && *p_ == '}') {
          ++p_;
          if (!h_->end_object()) return SaxResult::kStopped;
          goto after_value;
        }
        in_object.push_back(true);
        goto key;
      case '[':
        ++p_;
        if (!h_->start_array(static_cast<std::size_t>(-1))) return SaxResult::kStopped;
        SkipSpace();
        if (p_ != end_ && *p_ == ']') {
          ++p_;
          if (!h_->end_array()) return SaxResult::kStopped;
          goto after_value;
        }
        in_object.push_back(false);
        goto value;
      case '"':
        ++p_;
        if (!ReadString()) return SaxResult::kSyntaxError;
        if (!h_->string(buffer_)) return SaxResult::kStopped;
        goto after_value;
      case 't':
        if (!Literal("true")) return SaxResult::kSyntaxError;
        if (!h_->boolean(true)) return SaxResult::kStopped;
        goto after_value;
      case 'f':
        if (!Literal("false")) return SaxResult::kSyntaxError;
        if (!h_->boolean(false)) return SaxResult::kStopped;
        goto after_value;
      case 'n':
        if (!Literal("null")) return SaxResult::kSyntaxError;
        if (!h_->null()) return SaxResult::kStopped;
        goto after_value;
      default: {
        const SaxResult r = ReadNumber();
        if (r != SaxResult::kDone) return r;
        goto after_value;
      }
    }
  key:
    // In an object, after '{' or ',': "name" ws ':' ws value.
    if (p_ == end_ || *p_ != '"') return SaxResult::kSyntaxError;
    ++p_;
    if (!ReadString()) return SaxResult::kSyntaxError;
    if (!h_->key(buffer_)) return SaxResult::kStopped;
    SkipSpace();
    if (p_ == end_ || *p_ != ':') return SaxResult::kSyntaxError;
    ++p_;
    SkipSpace();
    goto value;
  after_value:
    SkipSpace();
    // nlohmann's lexer reads a NUL byte as the end of the input: what
    // follows one is never read.
    if (in_object.empty()) {
      return p_ == end_ || *p_ == '\0' ? SaxResult::kDone : SaxResult::kSyntaxError;
    }
    if (p_ == end_) return SaxResult::kSyntaxError;
    if (*p_ == ',') {
      ++p_;
      SkipSpace();
      if (in_object.back()) goto key;
      goto value;
    }
    if (*p_ == (in_object.back() ? '}' : ']')) {
      ++p_;
      const bool object = in_object.back();
      in_object.pop_back();
      if (!(object ? h_->end_object() : h_->end_array())) return SaxResult::kStopped;
      goto after_value;
    }
    return SaxResult::kSyntaxError;
  }

 private:
  void SkipSpace() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }

  bool Literal(std::string_view word) {
    if (static_cast<std::size_t>(end_ - p_) < word.size() ||
        std::string_view(p_, word.size()) != word) {
      return false;
    }
    p_ += word.size();
    return true;
  }

  static int Hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  // Four hex digits after "\u": the code unit, or -1.
  int32_t CodeUnit() {
    if (end_ - p_ < 4) return -1;
    int32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const int d = Hex(p_[i]);
      if (d < 0) return -1;
      v = v * 16 + d;
    }
    p_ += 4;
    return v;
  }
  void AppendUtf8(uint32_t cp) {
    if (cp < 0x80) {
      buffer_.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      buffer_.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      buffer_.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      buffer_.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      buffer_.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      buffer_.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      buffer_.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      buffer_.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      buffer_.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      buffer_.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  // The bytes of one UTF-8 sequence starting at p_ (a lead byte >= 0x80) as
  // nlohmann's lexer accepts them (RFC 3629: no overlong forms, no
  // surrogates, nothing past U+10FFFF): its length, or 0.
  std::size_t Utf8Sequence() const {
    const auto b = [&](std::ptrdiff_t i) {
      return i < end_ - p_ ? static_cast<unsigned char>(p_[i]) : 0u;
    };
    const auto cont = [&](std::ptrdiff_t i, unsigned lo = 0x80, unsigned hi = 0xBF) {
      const unsigned c = b(i);
      return i < end_ - p_ && c >= lo && c <= hi;
    };
    const unsigned c = b(0);
    if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
    if (c == 0xE0) return cont(1, 0xA0) && cont(2) ? 3 : 0;
    if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) return cont(1) && cont(2) ? 3 : 0;
    if (c == 0xED) return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;
    if (c == 0xF0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
    if (c >= 0xF1 && c <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
    if (c == 0xF4) return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
    return 0;
  }

  // After the opening '"': the string's value into buffer_, p_ past the
  // closing '"'. False where nlohmann's lexer refuses it.
  bool ReadString() {
    buffer_.clear();
    for (;;) {
      const char* run = p_;
      while (p_ != end_) {
        const unsigned char c = static_cast<unsigned char>(*p_);
        if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) break;
        ++p_;
      }
      buffer_.append(run, static_cast<std::size_t>(p_ - run));
      if (p_ == end_) return false;
      const unsigned char c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        ++p_;
        return true;
      }
      if (c < 0x20) return false;  // a control character must be escaped
      if (c >= 0x80) {
        const std::size_t n = Utf8Sequence();
        if (n == 0) return false;
        buffer_.append(p_, n);
        p_ += n;
        continue;
      }
      // A backslash.
      if (++p_ == end_) return false;
      const char e = *p_++;
      switch (e) {
        case '"':
        case '\\':
        case '/':
          buffer_.push_back(e);
          break;
        case 'b':
          buffer_.push_back('\b');
          break;
        case 'f':
          buffer_.push_back('\f');
          break;
        case 'n':
          buffer_.push_back('\n');
          break;
        case 'r':
          buffer_.push_back('\r');
          break;
        case 't':
          buffer_.push_back('\t');
          break;
        case 'u': {
          const int32_t unit = CodeUnit();
          if (unit < 0) return false;
          uint32_t cp = static_cast<uint32_t>(unit);
          if (unit >= 0xD800 && unit <= 0xDBFF) {  // a high surrogate: its low one next
            if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return false;
            p_ += 2;
            const int32_t low = CodeUnit();
            if (low < 0xDC00 || low > 0xDFFF) return false;
            cp = 0x10000 + ((static_cast<uint32_t>(unit) - 0xD800) << 10) +
                 (static_cast<uint32_t>(low) - 0xDC00);
          } else if (unit >= 0xDC00 && unit <= 0xDFFF) {
            return false;  // a low surrogate alone
          }
          AppendUtf8(cp);
          break;
        }
        default:
          return false;
      }
    }
  }

  // A number at p_: an integer that fits int64 (negative) or uint64 as
  // number_integer / number_unsigned, anything else as number_float
  // (correctly rounded, as strtod); a float past a double is an error, as in
  // nlohmann (its out_of_range.406).
  SaxResult ReadNumber() {
    const char* start = p_;
    const bool negative = p_ != end_ && *p_ == '-';
    if (negative) ++p_;
    if (p_ == end_ || *p_ < '0' || *p_ > '9') return SaxResult::kSyntaxError;
    const char* digits = p_;
    if (*p_ == '0') {
      ++p_;
    } else {
      while (p_ != end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    }
    const char* digits_end = p_;
    bool is_float = false;
    if (p_ != end_ && *p_ == '.') {
      ++p_;
      if (p_ == end_ || *p_ < '0' || *p_ > '9') return SaxResult::kSyntaxError;
      while (p_ != end_ && *p_ >= '0' && *p_ <= '9') ++p_;
      is_float = true;
    }
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      if (p_ != end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ == end_ || *p_ < '0' || *p_ > '9') return SaxResult::kSyntaxError;
      while (p_ != end_ && *p_ >= '0' && *p_ <= '9') ++p_;
      is_float = true;
    }
    if (!is_float) {
      // At most 20 digits fit uint64; past it (or past int64's range when
      // negative) nlohmann reads the integer as a double.
      uint64_t v = 0;
      bool fits = digits_end - digits <= 20;
      for (const char* d = digits; fits && d != digits_end; ++d) {
        const uint64_t digit = static_cast<uint64_t>(*d - '0');
        if (v > (UINT64_MAX - digit) / 10) fits = false;
        v = v * 10 + digit;
      }
      if (fits && !negative) {
        return h_->number_unsigned(v) ? SaxResult::kDone : SaxResult::kStopped;
      }
      if (fits && v <= uint64_t{1} << 63) {
        const int64_t i = v == uint64_t{1} << 63 ? INT64_MIN : -static_cast<int64_t>(v);
        return h_->number_integer(i) ? SaxResult::kDone : SaxResult::kStopped;
      }
    }
    double d = 0;
    const auto [ptr, ec] = std::from_chars(start, p_, d, std::chars_format::general);
    if (ec == std::errc::result_out_of_range) {
      // Past a double or below its smallest: what strtod gives (inf, a
      // denormal or zero).
      const std::string token(start, p_);
      d = std::strtod(token.c_str(), nullptr);
    } else if (ec != std::errc() || ptr != p_) {
      return SaxResult::kSyntaxError;
    }
    if (!std::isfinite(d)) return SaxResult::kSyntaxError;
    return h_->number_float(d, kNoToken) ? SaxResult::kDone : SaxResult::kStopped;
  }

  inline static const std::string kNoToken;

  const char* p_;
  const char* const end_;
  Handler* const h_;
  std::string buffer_;  // the last string or key read
};

template <typename Handler>
SaxResult FastSaxParse(std::string_view text, Handler* handler) {
  return FastJsonReader<Handler>(text, handler).Read();
}

}  // namespace brook::serving::internal
