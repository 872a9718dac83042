// The wire-level tf.train.Example parser. The messages involved:
//
//   Example   { Features features = 1; }
//   Features  { map<string, Feature> feature = 1; }   // entry: key = 1, value = 2
//   Feature   { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2;
//                            Int64List int64_list = 3; } }
//   BytesList { repeated bytes value = 1; }
//   FloatList { repeated float value = 1 [packed]; }
//   Int64List { repeated int64 value = 1 [packed]; }
//
// The parser gives the result protobuf's own parser would give followed by
// the same policy (the reference parser does exactly that; tests compare):
//  - repeated float/int64 are accepted packed and unpacked, mixed;
//  - a known field number with an unexpected wire type is an unknown field;
//    unknown fields (varint, fixed64, length-delimited, groups, fixed32) are
//    skipped; field number 0, a stray end-group and wire types 6/7 are errors;
//  - map entries may hold key and value in any order, repeated (last key
//    wins, repeated values merge) or missing (key "", empty Feature);
//  - a name given twice replaces the earlier entry (map semantics), a
//    message field given twice merges, and setting another oneof case clears
//    the previous one;
//  - limits as in protobuf 3.21: tags and lengths at most 5 bytes, varints
//    10, nesting depth 100, records below 2 GiB.
// Where it is deliberately more lenient (as TensorFlow's own fast parser is):
// the contents of features that are not in the spec are skipped unread, and
// map keys are not checked to be UTF-8. Neither changes a successful result.
//
// Values are streamed straight into the batch columns; a rejected row is cut
// off again (TruncateToRows), so nothing allocates once the batch and the
// per-thread scratch have grown to size.

#include "trainer/input/example_parser.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/hash.h"
#include "trainer/input/parse_policy.h"

namespace brook::input {

using internal::ListKind;
using internal::Outcome;

static_assert(std::endian::native == std::endian::little,
              "packed floats are copied as host floats, which must be little-endian");

namespace {

// Where the values of a list go, by the slot's declaration.
enum class Store : uint8_t {
  kValidate,  // wrong kind for the slot: only check the wire data
  kFloats,    // fixed float column
  kInt64s,    // fixed int64 column
  kIds,       // varlen int64 column (uint64 ids)
  kHashes,    // varlen bytes column (Hash64 of each value)
  kLabel,     // the label: keep the first value as float
};

// What the hot path needs of a spec entry (or the label), flattened.
struct SlotInfo {
  ListKind declared = ListKind::kNone;  // the label: kFloat (kInt64 also taken)
  Store store = Store::kValidate;
  uint32_t limit = 0;  // values stored at most
  std::string name;
};

// Built once in Create. (Defined outside ExampleParser so that the helpers
// below can name it; ExampleParser::Index is private.)
struct NameIndex {
  // Feature name -> slot: the spec index; the label is features.size().
  absl::flat_hash_map<std::string, int> by_name;
  std::vector<SlotInfo> slots;  // features, then the label
  int label_slot = 0;
};

enum WireType : uint32_t {
  kVarint = 0,
  kFixed64 = 1,
  kLen = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32 = 5,
};

constexpr uint32_t Tag(uint32_t field, WireType type) { return field << 3 | type; }

// protobuf's default recursion limit; Features is depth 1.
constexpr int kMaxDepth = 100;

// Per-thread scratch for one row: where each spec feature stands. It lives
// in a thread_local so that the parser itself stays immutable (and shareable
// across threads) while the hot path still does not allocate.
struct FeatureState {
  ListKind kind = ListKind::kNone;  // oneof case of the last entry for it
  Outcome outcome = Outcome::kOk;   // set when the row is finished
  uint32_t count = 0;               // values of `kind` (stored or not)
};

struct Scratch {
  std::vector<FeatureState> features;
  // Name-order prediction: next_slot[s + 1] is the slot that followed slot s
  // in the last record (index 0: record start; label_slot + 2: after a name
  // not in the spec); -1 unknown. Writers emit features in the same order
  // record after record, so a guess checked by one string compare usually
  // replaces a hash lookup. Verified before use, so a stale table (another
  // parser on this thread) only costs a lookup.
  std::vector<int> next_slot;
  // Names not in the spec seen in this row (views into the record); a name
  // given twice counts once, as it would in the protobuf map.
  std::vector<std::string_view> unknown;
};

Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

// The state of one map entry of a spec feature (or the label) being parsed.
struct Sink {
  int slot = 0;
  Store mode = Store::kValidate;
  ListKind kind = ListKind::kNone;
  uint32_t count = 0;  // values of `kind` seen in this entry
  uint32_t limit = 0;  // store at most this many
};

class RowParser {
 public:
  RowParser(const FeatureSpec& spec, const NameIndex& index, std::string_view record,
            ColumnarBatch* batch, Scratch* scratch)
      : spec_(spec),
        index_(index),
        base_(reinterpret_cast<const uint8_t*>(record.data())),
        end_(base_ + record.size()),
        batch_(batch),
        scratch_(scratch) {}

  // Parses the record into the batch columns and the scratch. false: the
  // wire data is malformed (error_offset / error_what say where and why).
  bool Run();

  size_t error_offset() const { return static_cast<size_t>(err_at_ - base_); }
  const char* error_what() const { return err_what_; }

  ListKind label_kind() const { return label_kind_; }
  uint32_t label_count() const { return label_count_; }
  float label_value() const { return label_value_; }

 private:
  bool Fail(const uint8_t* at, const char* what) {
    err_at_ = at;
    err_what_ = what;
    return false;
  }

  bool ReadTag(const uint8_t*& p, const uint8_t* end, uint32_t* tag);
  bool ReadVarint(const uint8_t*& p, const uint8_t* end, uint64_t* v);
  // Reads a length prefix and checks it against `end`; *sub_end = p + length.
  bool ReadLength(const uint8_t*& p, const uint8_t* end, const uint8_t** sub_end);
  bool SkipField(uint32_t tag, const uint8_t*& p, const uint8_t* end, int depth);

  bool ParseFeatures(const uint8_t* p, const uint8_t* end);
  bool ParseEntry(const uint8_t* p, const uint8_t* end);
  bool ParseFeature(const uint8_t* p, const uint8_t* end, Sink* sink);
  bool ParseInt64List(const uint8_t* p, const uint8_t* end, Sink* sink);
  bool ParseFloatList(const uint8_t* p, const uint8_t* end, Sink* sink);
  bool ParseBytesList(const uint8_t* p, const uint8_t* end, Sink* sink);

  // Finds the slot of `key` (-1: not in the spec), guessing from name order.
  int Lookup(std::string_view key);
  // Drops what `slot` stored for this row so far.
  void Truncate(int slot);
  // Starts a new oneof case for the sink's slot: drops the previous case's
  // values and decides where values of `kind` go.
  void BeginKind(Sink* sink, ListKind kind);
  void AddInt64(Sink* sink, uint64_t v);
  void AddFloats(Sink* sink, const uint8_t* p, uint32_t n);

  const FeatureSpec& spec_;
  const NameIndex& index_;
  const uint8_t* const base_;
  const uint8_t* const end_;
  ColumnarBatch* const batch_;
  Scratch* const scratch_;

  int prev_slot_ = -1;  // slot of the previous entry; -1: none yet
  ListKind label_kind_ = ListKind::kNone;
  uint32_t label_count_ = 0;
  float label_value_ = 0.0f;

  const uint8_t* err_at_ = nullptr;
  const char* err_what_ = "";
};

// Tags are 32-bit varints of at most 5 bytes; bits past 32 are dropped, as
// protobuf does.
inline bool RowParser::ReadTag(const uint8_t*& p, const uint8_t* end, uint32_t* tag) {
  const uint8_t* const start = p;
  uint32_t v = 0;
  for (int i = 0; i < 5; ++i) {
    if (p == end) return Fail(start, "truncated tag");
    const uint32_t b = *p++;
    v |= (b & 0x7f) << (7 * i);
    if (b < 0x80) {
      if ((v >> 3) == 0) return Fail(start, "field number 0");
      // 6 and 7 are invalid wherever they appear, so reject them here, where
      // the offset still points at the tag.
      if ((v & 7) > kFixed32) return Fail(start, "invalid wire type");
      *tag = v;
      return true;
    }
  }
  return Fail(start, "tag longer than 5 bytes");
}

inline bool RowParser::ReadVarint(const uint8_t*& p, const uint8_t* end, uint64_t* v) {
  if (p != end && *p < 0x80) {  // the common one-byte case
    *v = *p++;
    return true;
  }
  const uint8_t* const start = p;
  uint64_t r = 0;
  for (int i = 0; i < 10; ++i) {
    if (p == end) return Fail(start, "truncated varint");
    const uint64_t b = *p++;
    r |= (b & 0x7f) << (7 * i);  // bits past 64 (10th byte) are dropped
    if (b < 0x80) {
      *v = r;
      return true;
    }
  }
  return Fail(start, "varint longer than 10 bytes");
}

// Lengths are at most 5 bytes and below 2 GiB in protobuf; the record is
// below 2 GiB (checked in Append), so comparing with what is left suffices.
inline bool RowParser::ReadLength(const uint8_t*& p, const uint8_t* end, const uint8_t** sub_end) {
  const uint8_t* const start = p;
  uint64_t len = 0;
  for (int i = 0;; ++i) {
    if (i == 5) return Fail(start, "length longer than 5 bytes");
    if (p == end) return Fail(start, "truncated length");
    const uint64_t b = *p++;
    len |= (b & 0x7f) << (7 * i);
    if (b < 0x80) break;
  }
  if (len > static_cast<uint64_t>(end - p)) {
    return Fail(start, "length runs past the end of its message");
  }
  *sub_end = p + len;
  return true;
}

bool RowParser::SkipField(uint32_t tag, const uint8_t*& p, const uint8_t* end, int depth) {
  const uint8_t* const start = p;
  switch (tag & 7) {
    case kVarint: {
      uint64_t ignored;
      return ReadVarint(p, end, &ignored);
    }
    case kFixed64:
      if (end - p < 8) return Fail(start, "truncated fixed64");
      p += 8;
      return true;
    case kLen: {
      const uint8_t* sub_end;
      if (!ReadLength(p, end, &sub_end)) return false;
      p = sub_end;
      return true;
    }
    case kFixed32:
      if (end - p < 4) return Fail(start, "truncated fixed32");
      p += 4;
      return true;
    case kStartGroup: {
      if (depth + 1 > kMaxDepth) return Fail(start, "groups nested too deeply");
      for (;;) {
        const uint8_t* const field_start = p;
        if (p == end) return Fail(start, "unterminated group");
        uint32_t inner;
        if (!ReadTag(p, end, &inner)) return false;
        if ((inner & 7) == kEndGroup) {
          if ((inner >> 3) != (tag >> 3)) return Fail(field_start, "mismatched end-group");
          return true;
        }
        if (!SkipField(inner, p, end, depth + 1)) return false;
      }
    }
    case kEndGroup:
      return Fail(start, "end-group without a start-group");
    default:
      return Fail(start, "invalid wire type");
  }
}

bool RowParser::Run() {
  const uint8_t* p = base_;
  while (p != end_) {
    const uint8_t* const field_start = p;
    uint32_t tag;
    if (!ReadTag(p, end_, &tag)) return false;
    if (tag == Tag(1, kLen)) {  // Example.features
      const uint8_t* sub_end;
      if (!ReadLength(p, end_, &sub_end)) return false;
      if (!ParseFeatures(p, sub_end)) return false;
      p = sub_end;
    } else if ((tag & 7) == kEndGroup) {
      return Fail(field_start, "end-group without a start-group");
    } else if (!SkipField(tag, p, end_, 0)) {
      return false;
    }
  }
  return true;
}

bool RowParser::ParseFeatures(const uint8_t* p, const uint8_t* end) {
  while (p != end) {
    const uint8_t* const field_start = p;
    uint32_t tag;
    if (!ReadTag(p, end, &tag)) return false;
    if (tag == Tag(1, kLen)) {  // one map entry
      const uint8_t* sub_end;
      if (!ReadLength(p, end, &sub_end)) return false;
      if (!ParseEntry(p, sub_end)) return false;
      p = sub_end;
    } else if ((tag & 7) == kEndGroup) {
      return Fail(field_start, "end-group without a start-group");
    } else if (!SkipField(tag, p, end, 1)) {
      return false;
    }
  }
  return true;
}

bool RowParser::ParseEntry(const uint8_t* p, const uint8_t* end) {
  // Pass 1: find the key (the last one wins) and check the entry's framing.
  // Usually the entry is exactly key, value; remember the value so that case
  // needs no second pass.
  const uint8_t* const entry_start = p;
  std::string_view key;  // absent key = ""
  const uint8_t* value = nullptr;
  const uint8_t* value_end = nullptr;
  int num_values = 0;
  while (p != end) {
    const uint8_t* const field_start = p;
    uint32_t tag;
    if (!ReadTag(p, end, &tag)) return false;
    if (tag == Tag(1, kLen) || tag == Tag(2, kLen)) {
      const uint8_t* sub_end;
      if (!ReadLength(p, end, &sub_end)) return false;
      if (tag == Tag(1, kLen)) {
        key = std::string_view(reinterpret_cast<const char*>(p), sub_end - p);
      } else if (num_values++ == 0) {
        value = p;
        value_end = sub_end;
      }
      p = sub_end;
    } else if ((tag & 7) == kEndGroup) {
      return Fail(field_start, "end-group without a start-group");
    } else if (!SkipField(tag, p, end, 2)) {
      return false;
    }
  }

  const int slot = Lookup(key);
  if (slot < 0) {
    scratch_->unknown.push_back(key);
    return true;  // not in the spec: its value is not read at all
  }

  // A later entry with the same name replaces this row's value entirely.
  if (slot != index_.label_slot && scratch_->features[slot].count > 0) Truncate(slot);
  Sink sink;
  sink.slot = slot;
  if (num_values == 1) {
    if (!ParseFeature(value, value_end, &sink)) return false;
  } else if (num_values > 1) {
    // Pass 2: several values in one entry merge, in order.
    p = entry_start;
    while (p != end) {
      uint32_t tag;
      if (!ReadTag(p, end, &tag)) return false;
      if (tag == Tag(2, kLen)) {
        const uint8_t* sub_end;
        if (!ReadLength(p, end, &sub_end)) return false;
        if (!ParseFeature(p, sub_end, &sink)) return false;
        p = sub_end;
      } else if (!SkipField(tag, p, end, 2)) {
        return false;
      }
    }
  }

  if (sink.slot == index_.label_slot) {
    label_kind_ = sink.kind;
    label_count_ = sink.count;
  } else {
    FeatureState& state = scratch_->features[sink.slot];
    state.kind = sink.kind;
    state.count = sink.count;
  }
  return true;
}

inline int RowParser::Lookup(std::string_view key) {
  const size_t num_slots = index_.slots.size();  // features + label
  int& guess = scratch_->next_slot[static_cast<size_t>(prev_slot_ + 1)];
  int slot;
  if (guess >= 0 && static_cast<size_t>(guess) < num_slots &&
      index_.slots[static_cast<size_t>(guess)].name == key) {
    slot = guess;
  } else {
    // Our abseil's string_view is its own type, not std::string_view.
    const auto it = index_.by_name.find(absl::string_view(key.data(), key.size()));
    slot = it == index_.by_name.end() ? -1 : it->second;
    guess = slot;
  }
  prev_slot_ = slot >= 0 ? slot : static_cast<int>(num_slots);
  return slot;
}

void RowParser::Truncate(int slot) {
  if (slot == index_.label_slot) return;
  const FeatureSpecEntry& f = spec_.features[slot];
  Column& c = batch_->columns[slot];
  if (f.kind == FeatureKind::kFixed) {
    const size_t row_start = batch_->num_rows * static_cast<size_t>(f.length);
    if (f.type == FeatureType::kFloat) {
      c.floats.resize(row_start);
    } else {
      c.int64s.resize(row_start);
    }
  } else {
    c.ids.resize(c.row_splits.back());  // this row's split is pushed at the end
  }
}

inline void RowParser::BeginKind(Sink* sink, ListKind kind) {
  if (sink->count > 0) Truncate(sink->slot);  // the previous case had values
  sink->kind = kind;
  sink->count = 0;
  const SlotInfo& si = index_.slots[static_cast<size_t>(sink->slot)];
  const bool matches =
      kind == si.declared || (si.store == Store::kLabel && kind == ListKind::kInt64);
  sink->mode = matches ? si.store : Store::kValidate;
  sink->limit = si.limit;
}

bool RowParser::ParseFeature(const uint8_t* p, const uint8_t* end, Sink* sink) {
  while (p != end) {
    const uint8_t* const field_start = p;
    uint32_t tag;
    if (!ReadTag(p, end, &tag)) return false;
    const uint32_t field = tag >> 3;
    if ((tag & 7) == kLen && field >= 1 && field <= 3) {
      const uint8_t* sub_end;
      if (!ReadLength(p, end, &sub_end)) return false;
      const auto kind = static_cast<ListKind>(field);
      // The same case again merges into the list; another case replaces it.
      if (kind != sink->kind) BeginKind(sink, kind);
      bool ok;
      switch (kind) {
        case ListKind::kInt64:
          ok = ParseInt64List(p, sub_end, sink);
          break;
        case ListKind::kFloat:
          ok = ParseFloatList(p, sub_end, sink);
          break;
        default:
          ok = ParseBytesList(p, sub_end, sink);
          break;
      }
      if (!ok) return false;
      p = sub_end;
    } else if ((tag & 7) == kEndGroup) {
      return Fail(field_start, "end-group without a start-group");
    } else if (!SkipField(tag, p, end, 3)) {
      return false;
    }
  }
  return true;
}

inline void RowParser::AddInt64(Sink* sink, uint64_t v) {
  if (sink->count < sink->limit) {
    switch (sink->mode) {
      case Store::kInt64s:
        batch_->columns[sink->slot].int64s.push_back(static_cast<int64_t>(v));
        break;
      case Store::kIds:
        batch_->columns[sink->slot].ids.push_back(v);
        break;
      case Store::kLabel:
        label_value_ = static_cast<float>(static_cast<int64_t>(v));
        break;
      default:
        break;
    }
  }
  ++sink->count;
}

inline void RowParser::AddFloats(Sink* sink, const uint8_t* p, uint32_t n) {
  if (sink->count < sink->limit && n > 0) {
    const uint32_t take = std::min(n, sink->limit - sink->count);
    if (sink->mode == Store::kFloats) {
      std::vector<float>& out = batch_->columns[sink->slot].floats;
      const size_t old = out.size();
      out.resize(old + take);
      std::memcpy(out.data() + old, p, take * sizeof(float));
    } else if (sink->mode == Store::kLabel) {
      std::memcpy(&label_value_, p, sizeof(float));
    }
  }
  sink->count += n;
}

bool RowParser::ParseInt64List(const uint8_t* p, const uint8_t* end, Sink* sink) {
  while (p != end) {
    const uint8_t* const field_start = p;
    uint32_t tag;
    if (!ReadTag(p, end, &tag)) return false;
    if (tag == Tag(1, kLen)) {  // packed
      const uint8_t* sub_end;
      if (!ReadLength(p, end, &sub_end)) return false;
      while (p != sub_end) {
        uint64_t v;
        if (!ReadVarint(p, sub_end, &v)) return false;
        AddInt64(sink, v);
      }
    } else if (tag == Tag(1, kVarint)) {  // unpacked
      uint64_t v;
      if (!ReadVarint(p, end, &v)) return false;
      AddInt64(sink, v);
    } else if ((tag & 7) == kEndGroup) {
      return Fail(field_start, "end-group without a start-group");
    } else if (!SkipField(tag, p, end, 4)) {
      return false;
    }
  }
  return true;
}

bool RowParser::ParseFloatList(const uint8_t* p, const uint8_t* end, Sink* sink) {
  while (p != end) {
    const uint8_t* const field_start = p;
    uint32_t tag;
    if (!ReadTag(p, end, &tag)) return false;
    if (tag == Tag(1, kLen)) {  // packed
      const uint8_t* sub_end;
      if (!ReadLength(p, end, &sub_end)) return false;
      const size_t bytes = static_cast<size_t>(sub_end - p);
      if (bytes % 4 != 0) return Fail(field_start, "packed floats not a multiple of 4 bytes");
      AddFloats(sink, p, static_cast<uint32_t>(bytes / 4));
      p = sub_end;
    } else if (tag == Tag(1, kFixed32)) {  // unpacked
      if (end - p < 4) return Fail(p, "truncated float");
      AddFloats(sink, p, 1);
      p += 4;
    } else if ((tag & 7) == kEndGroup) {
      return Fail(field_start, "end-group without a start-group");
    } else if (!SkipField(tag, p, end, 4)) {
      return false;
    }
  }
  return true;
}

bool RowParser::ParseBytesList(const uint8_t* p, const uint8_t* end, Sink* sink) {
  while (p != end) {
    const uint8_t* const field_start = p;
    uint32_t tag;
    if (!ReadTag(p, end, &tag)) return false;
    if (tag == Tag(1, kLen)) {
      const uint8_t* sub_end;
      if (!ReadLength(p, end, &sub_end)) return false;
      if (sink->mode == Store::kHashes && sink->count < sink->limit) {
        batch_->columns[sink->slot].ids.push_back(
            Hash64(std::string_view(reinterpret_cast<const char*>(p), sub_end - p)));
      }
      ++sink->count;
      p = sub_end;
    } else if ((tag & 7) == kEndGroup) {
      return Fail(field_start, "end-group without a start-group");
    } else if (!SkipField(tag, p, end, 4)) {
      return false;
    }
  }
  return true;
}

// Applies the missing / mismatch policy to every spec feature, fills
// defaults and closes the varlen rows. On error the caller rolls back.
absl::Status FinishRow(const FeatureSpec& spec, Scratch* scratch, ColumnarBatch* batch,
                       bool* any_policy_hit) {
  const size_t rows = batch->num_rows;
  for (size_t i = 0; i < spec.features.size(); ++i) {
    const FeatureSpecEntry& f = spec.features[i];
    FeatureState& st = scratch->features[i];
    Column& c = batch->columns[i];
    st.outcome = internal::Classify(f, st.kind, st.count);
    if (st.outcome != Outcome::kOk) {
      if (st.outcome == Outcome::kMissing) {
        if (spec.on_missing == MissingPolicy::kError) return internal::FeatureMissingError(f);
      } else if (spec.on_type_mismatch == MismatchPolicy::kError) {
        return internal::FeatureMismatchError(f, st.kind, st.count);
      }
      *any_policy_hit = true;
      // Treated as missing: default value (fixed) or empty list (varlen).
      if (f.kind == FeatureKind::kFixed) {
        const size_t len = static_cast<size_t>(f.length);
        if (f.type == FeatureType::kFloat) {
          c.floats.resize(rows * len);
          c.floats.resize((rows + 1) * len, static_cast<float>(f.default_value));
        } else {
          c.int64s.resize(rows * len);
          c.int64s.resize((rows + 1) * len, static_cast<int64_t>(f.default_value));
        }
      } else {
        c.ids.resize(c.row_splits.back());
      }
    }
    if (f.kind == FeatureKind::kVarLen) {
      c.row_splits.push_back(static_cast<uint32_t>(c.ids.size()));
    }
  }
  return absl::OkStatus();
}

uint64_t CountDistinct(std::vector<std::string_view>* names) {
  if (names->size() <= 1) return names->size();
  std::sort(names->begin(), names->end());
  return static_cast<uint64_t>(std::unique(names->begin(), names->end()) - names->begin());
}

}  // namespace

struct ExampleParser::Index : NameIndex {};

ExampleParser::ExampleParser(FeatureSpec spec) : spec_(std::move(spec)) {}

absl::StatusOr<ExampleParser> ExampleParser::Create(const FeatureSpec& spec) {
  absl::Status valid = spec.Validate();
  if (!valid.ok()) return valid;
  ExampleParser parser(spec);
  auto index = std::make_shared<Index>();
  const FeatureSpec& own = parser.spec_;
  index->label_slot = static_cast<int>(own.features.size());
  index->by_name.reserve(own.features.size() + 1);
  for (size_t i = 0; i < own.features.size(); ++i) {
    const FeatureSpecEntry& f = own.features[i];
    index->by_name.emplace(f.name, static_cast<int>(i));
    SlotInfo si;
    si.declared = internal::DeclaredKind(f.type);
    si.name = f.name;
    if (f.kind == FeatureKind::kFixed) {
      si.store = f.type == FeatureType::kFloat ? Store::kFloats : Store::kInt64s;
      si.limit = static_cast<uint32_t>(f.length);
    } else {
      si.store = f.type == FeatureType::kBytes ? Store::kHashes : Store::kIds;
      si.limit = f.max_length > 0 ? static_cast<uint32_t>(f.max_length)
                                  : std::numeric_limits<uint32_t>::max();
    }
    index->slots.push_back(si);
  }
  index->by_name.emplace(own.label_name, index->label_slot);
  index->slots.push_back(
      {.declared = ListKind::kFloat, .store = Store::kLabel, .limit = 1, .name = own.label_name});
  parser.index_ = std::move(index);
  return parser;
}

absl::StatusOr<ExampleParser> ExampleParser::CreateLabelOptional(const FeatureSpec& spec) {
  absl::StatusOr<ExampleParser> parser = Create(spec);
  if (parser.ok()) parser->label_optional_ = true;
  return parser;
}

void ExampleParser::InitBatch(ColumnarBatch* batch) const {
  batch->columns.resize(spec_.features.size());
  batch->Clear();
}

void ExampleParser::InitStats(ParseStats* stats) const {
  *stats = ParseStats();
  stats->missing.assign(spec_.features.size(), 0);
  stats->mismatched.assign(spec_.features.size(), 0);
}

absl::Status ExampleParser::Append(std::string_view serialized, ColumnarBatch* batch,
                                   ParseStats* stats) const {
  const size_t n = spec_.features.size();
  if (stats != nullptr && (stats->missing.size() != n || stats->mismatched.size() != n)) {
    stats->missing.resize(n, 0);
    stats->mismatched.resize(n, 0);
  }
  auto reject = [stats](absl::Status s) {
    if (stats != nullptr) ++stats->rejected;
    return s;
  };
  if (const char* what = internal::CheckBatchShape(spec_, *batch)) {
    return reject(internal::BatchShapeError(spec_, what));
  }
  // protobuf refuses messages of 2 GiB and more; so do we, which also keeps
  // every offset and count below in 32 bits.
  if (serialized.size() >= (size_t{1} << 31)) {
    return reject(absl::InvalidArgumentError(
        absl::StrCat("tf.train.Example of ", serialized.size(), " bytes exceeds 2 GiB")));
  }

  Scratch& scratch = ThreadScratch();
  scratch.features.assign(n, FeatureState());
  scratch.unknown.clear();
  if (scratch.next_slot.size() < n + 3) scratch.next_slot.resize(n + 3, -1);

  RowParser row(spec_, *index_, serialized, batch, &scratch);
  if (!row.Run()) {
    internal::TruncateToRows(spec_, batch);
    return reject(absl::DataLossError(absl::StrCat("malformed tf.train.Example: ", row.error_what(),
                                                   " at byte offset ", row.error_offset(), " of ",
                                                   serialized.size())));
  }

  absl::Status status;
  bool any_policy_hit = false;
  if (row.label_kind() == ListKind::kNone) {
    if (label_optional_) {
      status = FinishRow(spec_, &scratch, batch, &any_policy_hit);
    } else {
      status = internal::LabelMissingError(spec_);
    }
  } else if (!internal::LabelOk(row.label_kind(), row.label_count())) {
    status = internal::LabelMismatchError(spec_, row.label_kind(), row.label_count());
  } else {
    status = FinishRow(spec_, &scratch, batch, &any_policy_hit);
  }
  if (!status.ok()) {
    internal::TruncateToRows(spec_, batch);
    return reject(std::move(status));
  }
  batch->labels.push_back(row.label_value());
  ++batch->num_rows;

  if (stats != nullptr) {
    ++stats->examples;
    if (any_policy_hit) {
      for (size_t i = 0; i < n; ++i) {
        stats->missing[i] += scratch.features[i].outcome == Outcome::kMissing;
        stats->mismatched[i] += scratch.features[i].outcome == Outcome::kMismatch;
      }
    }
    stats->unknown_features += CountDistinct(&scratch.unknown);
  }
  return absl::OkStatus();
}

}  // namespace brook::input
