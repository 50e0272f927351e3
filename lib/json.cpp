#include "lib/json.h"

#include <rapidjson/error/en.h>
#include <rapidjson/internal/dtoa.h>
#include <rapidjson/internal/ieee754.h>
#include <rapidjson/internal/itoa.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/reader.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace iw::json {

namespace {

// ---------------------------------------------------------------------------------------------
// Parsing untrusted text.
//
// A single forward pass with an explicit stack of open containers (no recursion), feeding the
// Document's SAX interface, so the tree is built exactly as RapidJSON builds it. Strings are
// scanned sixteen (SSE2) or eight bytes at a time; UTF-8 is validated inside strings (outside
// them only ASCII is valid JSON). Numbers are handed to RapidJSON's own reader, so they convert
// exactly as RapidJSON converts them.

using rapidjson::ParseErrorCode;

struct ParseError {
  ParseErrorCode code = rapidjson::kParseErrorNone;
  std::size_t offset = 0;
  bool tooDeep = false;
};

// Forwards the one number RapidJSON's reader parses to the document; any other event fails.
struct NumberHandler : rapidjson::BaseReaderHandler<rapidjson::UTF8<>, NumberHandler> {
  explicit NumberHandler(Document& d) : doc(d) {}
  bool Default() { return false; }
  bool Int(int i) { return doc.Int(i); }
  bool Uint(unsigned u) { return doc.Uint(u); }
  bool Int64(std::int64_t i) { return doc.Int64(i); }
  bool Uint64(std::uint64_t u) { return doc.Uint64(u); }
  bool Double(double d) { return doc.Double(d); }
  Document& doc;
};

constexpr std::uint64_t kOnes = 0x0101010101010101ULL;
constexpr std::uint64_t kHighs = 0x8080808080808080ULL;

// A mask with the high bit set in each of the eight bytes of `w` (loaded little-endian) that
// ends a fast string scan: '"', '\\', a control character (< 0x20) or a non-ASCII byte (which
// needs UTF-8 validation). Bytes after the first flagged one may be flagged spuriously (borrows),
// never bytes before it, so the lowest set bit is exact.
inline std::uint64_t SpecialBytes(std::uint64_t w) {
  const std::uint64_t quote = w ^ (kOnes * '"');
  const std::uint64_t backslash = w ^ (kOnes * '\\');
  const std::uint64_t control = (w - kOnes * 0x20) & ~w;
  const std::uint64_t isQuote = (quote - kOnes) & ~quote;
  const std::uint64_t isBackslash = (backslash - kOnes) & ~backslash;
  return (control | isQuote | isBackslash | w) & kHighs;
}

#if defined(__SSE2__)
// SpecialBytes for 16 bytes: bit i of the result is set when byte i of `v` is not plain.
inline int SpecialMask(__m128i v) {
  const __m128i control = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1F)), v);  // v <= 0x1F
  const __m128i special = _mm_or_si128(
      _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
      control);
  // OR-ing in `v` flags the non-ASCII bytes (high bit set).
  return _mm_movemask_epi8(_mm_or_si128(special, v));
}
#endif

// Advances `p` over plain string bytes (not special per SpecialBytes) while a whole block of 16
// (SSE2) or 8 bytes is readable; the caller looks at the rest byte by byte.
inline const char* SkipPlainBytes(const char* p, const char* end) {
#if defined(__SSE2__)
  while (end - p >= 16) {
    const int mask = SpecialMask(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    if (mask != 0) return p + std::countr_zero(static_cast<unsigned>(mask));
    p += 16;
  }
#endif
  if constexpr (std::endian::native == std::endian::little) {
    while (end - p >= 8) {
      std::uint64_t w;
      std::memcpy(&w, p, 8);
      if (std::uint64_t special = SpecialBytes(w)) return p + std::countr_zero(special) / 8;
      p += 8;
    }
  }
  return p;
}

inline int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Writes code point `cp` (at most U+10FFFF, not a surrogate) as UTF-8 at `w`; returns its length.
std::size_t EncodeUtf8(std::uint32_t cp, char* w) {
  if (cp < 0x80) {
    w[0] = static_cast<char>(cp);
    return 1;
  }
  if (cp < 0x800) {
    w[0] = static_cast<char>(0xC0 | (cp >> 6));
    w[1] = static_cast<char>(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    w[0] = static_cast<char>(0xE0 | (cp >> 12));
    w[1] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    w[2] = static_cast<char>(0x80 | (cp & 0x3F));
    return 3;
  }
  w[0] = static_cast<char>(0xF0 | (cp >> 18));
  w[1] = static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
  w[2] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
  w[3] = static_cast<char>(0x80 | (cp & 0x3F));
  return 4;
}

// A byte a string holds as it is: printable ASCII other than '"' and '\\'.
inline bool IsPlain(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u >= 0x20 && u < 0x80 && c != '"' && c != '\\';
}

// Length of the well-formed UTF-8 sequence (RFC 3629: no overlong forms, no surrogates, at most
// U+10FFFF) starting at non-ASCII byte `p[0]`, or 0 when it is not one. `n` bytes are readable.
std::size_t Utf8SequenceLength(const unsigned char* p, std::size_t n) {
  const unsigned char c = p[0];
  std::size_t len;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (n < len || p[1] < lo || p[1] > hi) return 0;
  for (std::size_t i = 2; i < len; ++i) {
    if ((p[i] & 0xC0) != 0x80) return 0;
  }
  return len;
}

// The parser. Every step takes the position of what it reads and returns the position after it,
// or nullptr once it has recorded an error; positions stay in registers that way.
class Parser {
 public:
  // With `borrow`, strings without escapes are handed to the document by reference into `text`.
  Parser(std::string_view text, Document& doc, bool borrow)
      : begin_(text.data()), end_(text.data() + text.size()), doc_(doc), borrow_(borrow) {}

  // Parses the whole text into the document's SAX stack; false with error() set on failure.
  bool Run() {
    // A UTF-8 byte order mark may start the text (RFC 8259 §8.1 lets parsers ignore it).
    const char* p = begin_;
    if (end_ - p >= 3 && std::memcmp(p, "\xEF\xBB\xBF", 3) == 0) p += 3;
    p = SkipWhitespace(p);
    if (p == end_) return Stop(rapidjson::kParseErrorDocumentEmpty, p);
    for (;;) {
      // A value starts at p (whitespace skipped).
      if (p == end_) return Stop(rapidjson::kParseErrorValueInvalid, p);
      switch (*p) {
        case '{':
        case '[': {
          const bool object = *p == '{';
          if (depth_ == kMaxDepth) {
            error_.tooDeep = true;
            return Stop(rapidjson::kParseErrorTermination, p);
          }
          if (object) {
            doc_.StartObject();
          } else {
            doc_.StartArray();
          }
          p = SkipWhitespace(p + 1);
          if (p != end_ && *p == (object ? '}' : ']')) {  // empty: complete
            ++p;
            if (object) {
              doc_.EndObject(0);
            } else {
              doc_.EndArray(0);
            }
            break;
          }
          frames_[depth_++] = Frame{object, 0};
          if (object && (p = ParseMemberName(p)) == nullptr) return false;
          continue;  // to the container's first value
        }
        case '"':
          p = ParseString(p, /*key=*/false);
          break;
        case 't':
          p = ParseLiteral(p, "true");
          if (p != nullptr) doc_.Bool(true);
          break;
        case 'f':
          p = ParseLiteral(p, "false");
          if (p != nullptr) doc_.Bool(false);
          break;
        case 'n':
          p = ParseLiteral(p, "null");
          if (p != nullptr) doc_.Null();
          break;
        default:
          p = (*p == '-' || (*p >= '0' && *p <= '9')) ? ParseNumber(p)
                                                      : Fail(rapidjson::kParseErrorValueInvalid, p);
          break;
      }
      if (p == nullptr) return false;
      // The value is complete: close every container it completes, until one continues.
      for (;;) {
        p = SkipWhitespace(p);
        if (depth_ == 0) {
          return p == end_ || Stop(rapidjson::kParseErrorDocumentRootNotSingular, p);
        }
        Frame& top = frames_[depth_ - 1];
        ++top.count;
        if (p != end_ && *p == ',') {
          p = SkipWhitespace(p + 1);
          if (top.object && (p = ParseMemberName(p)) == nullptr) return false;
          break;
        }
        if (p == end_ || *p != (top.object ? '}' : ']')) {
          return Stop(top.object ? rapidjson::kParseErrorObjectMissCommaOrCurlyBracket
                                 : rapidjson::kParseErrorArrayMissCommaOrSquareBracket,
                      p);
        }
        ++p;
        if (top.object) {
          doc_.EndObject(top.count);
        } else {
          doc_.EndArray(top.count);
        }
        --depth_;
      }
    }
  }

  const ParseError& error() const { return error_; }

 private:
  struct Frame {
    bool object;
    rapidjson::SizeType count;
  };

  // Records the error; returns nullptr for the step to return.
  const char* Fail(ParseErrorCode code, const char* at) {
    error_.code = code;
    error_.offset = static_cast<std::size_t>(at - begin_);
    return nullptr;
  }
  // Records the error; returns false for Run to return.
  bool Stop(ParseErrorCode code, const char* at) { return Fail(code, at) != nullptr; }

  const char* SkipWhitespace(const char* p) const {
    // Every JSON whitespace byte is <= ' ': one comparison when there is none.
    while (p != end_ && static_cast<unsigned char>(*p) <= ' ' &&
           (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) {
      ++p;
    }
    return p;
  }

  // Reads `"name"`, the colon after it and the whitespace around it: the position of the value.
  const char* ParseMemberName(const char* p) {
    if (p == end_ || *p != '"') return Fail(rapidjson::kParseErrorObjectMissName, p);
    p = ParseString(p, /*key=*/true);
    if (p == nullptr) return nullptr;
    p = SkipWhitespace(p);
    if (p == end_ || *p != ':') return Fail(rapidjson::kParseErrorObjectMissColon, p);
    return SkipWhitespace(p + 1);
  }

  const char* ParseLiteral(const char* p, std::string_view literal) {
    for (char expected : literal) {
      if (p == end_ || *p != expected) return Fail(rapidjson::kParseErrorValueInvalid, p);
      ++p;
    }
    return p;
  }

  const char* ParseNumber(const char* p) {
    rapidjson::MemoryStream in(p, static_cast<std::size_t>(end_ - p));
    NumberHandler handler(doc_);
    rapidjson::Reader reader;
    rapidjson::ParseResult r = reader.Parse<rapidjson::kParseStopWhenDoneFlag>(in, handler);
    if (r.IsError()) return Fail(r.Code(), p + r.Offset());
    return p + in.Tell();
  }

  // Hands a string read from the text (`decoded`: from scratch_) to the document.
  void Emit(const char* s, std::size_t n, bool key, bool decoded) {
    const auto length = static_cast<rapidjson::SizeType>(n);
    const bool copy = decoded || !borrow_;
    if (key) {
      doc_.Key(s, length, copy);
    } else {
      doc_.String(s, length, copy);
    }
  }

  // Reads the string whose opening quote is at p into the document, as a member name when `key`.
  const char* ParseString(const char* p, bool key) {
    const char* const start = p + 1;
    const char* const stop = SkipPlainBytes(start, end_);
    if (stop != end_ && *stop == '"') [[likely]] {  // plain ASCII, no escapes
      Emit(start, static_cast<std::size_t>(stop - start), key, /*decoded=*/false);
      return stop + 1;
    }
    return ParseStringSlowly(start, stop, key);
  }

  // ParseString from p on, for a string starting at `start` that needs a closer look: escapes,
  // non-ASCII, control characters, or its end within the last bytes of the text.
  [[gnu::noinline]] const char* ParseStringSlowly(const char* start, const char* p, bool key) {
    // Up to its first escape, the string is the text itself.
    for (;;) {
      if (p == end_) return Fail(rapidjson::kParseErrorStringMissQuotationMark, p);
      if (*p == '"') {
        Emit(start, static_cast<std::size_t>(p - start), key, /*decoded=*/false);
        return p + 1;
      }
      if (*p == '\\') break;
      if ((p = SkipSpecialByte(p)) == nullptr) return nullptr;
      p = SkipPlainBytes(p, end_);
    }
    // From there on it is decoded into scratch_, used as a raw buffer (its size the capacity);
    // plain runs are copied 16 bytes at a time while they are scanned.
    std::size_t n = static_cast<std::size_t>(p - start);
    Reserve(n);
    std::memcpy(scratch_.data(), start, n);
    for (;;) {
      // p is at an escape or another byte that is not plain.
      if (p == end_) return Fail(rapidjson::kParseErrorStringMissQuotationMark, p);
      if (*p == '"') {
        Emit(scratch_.data(), n, key, /*decoded=*/true);
        return p + 1;
      }
      Reserve(n + 4);  // the longest escape or UTF-8 sequence is 4 bytes
      if (*p == '\\') {
        if ((p = DecodeEscape(p, n)) == nullptr) return nullptr;
      } else {
        const char* next = SkipSpecialByte(p);
        if (next == nullptr) return nullptr;
        while (p != next) scratch_[n++] = *p++;
      }
#if defined(__SSE2__)
      while (end_ - p >= 16) {
        Reserve(n + 16);
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(scratch_.data() + n), v);
        const int mask = SpecialMask(v);
        const int plain = mask == 0 ? 16 : std::countr_zero(static_cast<unsigned>(mask));
        p += plain;
        n += static_cast<std::size_t>(plain);
        if (mask != 0) break;
      }
#endif
      while (p != end_ && IsPlain(*p)) {
        Reserve(n + 1);
        scratch_[n++] = *p++;
      }
    }
  }

  // Steps over the byte at p, which is neither plain, nor a quote or backslash: over the UTF-8
  // sequence it starts, or fails.
  const char* SkipSpecialByte(const char* p) {
    const auto c = static_cast<unsigned char>(*p);
    if (c < 0x20) {
      // RapidJSON's wording: a NUL reads as the end of its input.
      return Fail(c == 0 ? rapidjson::kParseErrorStringMissQuotationMark
                         : rapidjson::kParseErrorStringEscapeInvalid,
                  p);
    }
    if (c < 0x80) return p + 1;  // plain after all: the caller scans bytes in blocks
    std::size_t n = Utf8SequenceLength(reinterpret_cast<const unsigned char*>(p),
                                       static_cast<std::size_t>(end_ - p));
    if (n == 0) return Fail(rapidjson::kParseErrorStringInvalidEncoding, p);
    return p + n;
  }

  // Makes scratch_ hold at least `n` bytes (growing geometrically, keeping its contents).
  void Reserve(std::size_t n) {
    if (n > scratch_.size()) scratch_.resize(std::max(n, 2 * scratch_.size()));
  }

  // Decodes the escape at p (a backslash) into scratch_ at `n`, which has room for 4 bytes, and
  // advances `n` past it.
  const char* DecodeEscape(const char* p, std::size_t& n) {
    const char* const at = p++;
    if (p == end_) return Fail(rapidjson::kParseErrorStringEscapeInvalid, at);
    char* const w = scratch_.data() + n;
    const char e = *p++;
    switch (e) {
      case '"':
      case '\\':
      case '/':
        *w = e;
        break;
      case 'b':
        *w = '\b';
        break;
      case 'f':
        *w = '\f';
        break;
      case 'n':
        *w = '\n';
        break;
      case 'r':
        *w = '\r';
        break;
      case 't':
        *w = '\t';
        break;
      case 'u': {
        std::uint32_t cp = 0;
        if ((p = ParseHex4(p, cp, at)) == nullptr) return nullptr;
        if (cp >= 0xDC00 && cp <= 0xDFFF) {
          return Fail(rapidjson::kParseErrorStringUnicodeSurrogateInvalid, at);
        }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          if (end_ - p < 2 || p[0] != '\\' || p[1] != 'u') {
            return Fail(rapidjson::kParseErrorStringUnicodeSurrogateInvalid, at);
          }
          std::uint32_t low = 0;
          if ((p = ParseHex4(p + 2, low, at)) == nullptr) return nullptr;
          if (low < 0xDC00 || low > 0xDFFF) {
            return Fail(rapidjson::kParseErrorStringUnicodeSurrogateInvalid, at);
          }
          cp = 0x10000 + (((cp - 0xD800) << 10) | (low - 0xDC00));
        }
        n += EncodeUtf8(cp, w);
        return p;
      }
      default:
        return Fail(rapidjson::kParseErrorStringEscapeInvalid, at);
    }
    ++n;
    return p;
  }

  // Reads four hex digits at p into `cp`; an error is reported at `escape` (its backslash).
  const char* ParseHex4(const char* p, std::uint32_t& cp, const char* escape) {
    if (end_ - p < 4) return Fail(rapidjson::kParseErrorStringUnicodeEscapeInvalidHex, escape);
    for (int i = 0; i < 4; ++i) {
      const int h = HexValue(p[i]);
      if (h < 0) return Fail(rapidjson::kParseErrorStringUnicodeEscapeInvalidHex, escape);
      cp = (cp << 4) | static_cast<std::uint32_t>(h);
    }
    return p + 4;
  }

  const char* const begin_;
  const char* const end_;
  Document& doc_;
  const bool borrow_;
  int depth_ = 0;
  std::array<Frame, kMaxDepth> frames_;
  std::string scratch_;
  ParseError error_;
};

// ---------------------------------------------------------------------------------------------
// Serialisation.

// The escape RapidJSON's Writer writes for each byte: 0 for none, 'u' for \u00XX, else the letter
// after the backslash.
constexpr std::array<char, 256> kEscapes = [] {
  std::array<char, 256> t{};
  for (int c = 0; c < 0x20; ++c) t[c] = 'u';
  t['\b'] = 'b';
  t['\t'] = 't';
  t['\n'] = 'n';
  t['\f'] = 'f';
  t['\r'] = 'r';
  t['"'] = '"';
  t['\\'] = '\\';
  return t;
}();

// Writes compact JSON into a growing buffer, byte for byte as RapidJSON's Writer does (same
// escapes, same number conversions).
class TextWriter {
 public:
  // The text written so far.
  std::string Text() const {
    return std::string(buffer_.get(), static_cast<std::size_t>(pos_ - buffer_.get()));
  }

  // False, with the output cut there, at a NaN or infinite number (which the Writer refuses).
  bool Write(const Value& v) {
    switch (v.GetType()) {
      case rapidjson::kObjectType: {
        Put('{');
        bool first = true;
        for (const auto& m : v.GetObject()) {
          if (!first) Put(',');
          first = false;
          String(View(m.name));
          Put(':');
          if (!Write(m.value)) return false;
        }
        Put('}');
        return true;
      }
      case rapidjson::kArrayType: {
        Put('[');
        bool first = true;
        for (const auto& e : v.GetArray()) {
          if (!first) Put(',');
          first = false;
          if (!Write(e)) return false;
        }
        Put(']');
        return true;
      }
      default:
        return Scalar(v);
    }
  }

  // As Write, with object members in byte order of their names. `order` is scratch space shared
  // by the whole walk: each object sorts its members in a segment at its end.
  bool WriteCanonical(const Value& v, std::vector<const Value::Member*>& order,
                      const Value::Member* omit) {
    if (v.IsObject()) {
      const std::size_t base = order.size();
      for (const auto& m : v.GetObject()) {
        if (&m != omit) order.push_back(&m);
      }
      const auto first = order.begin() + static_cast<std::ptrdiff_t>(base);
      auto byName = [](const Value::Member* a, const Value::Member* b) {
        return View(a->name) < View(b->name);
      };
      // Already strictly increasing (the usual case) is the order std::sort would give.
      auto notBefore = [&](const Value::Member* a, const Value::Member* b) {
        return !byName(a, b);
      };
      if (std::adjacent_find(first, order.end(), notBefore) != order.end()) {
        std::sort(first, order.end(), byName);
      }
      const std::size_t end = order.size();
      Put('{');
      for (std::size_t i = base; i < end; ++i) {
        const Value::Member* m = order[i];  // `order` may reallocate below: index, don't iterate
        if (i > base) Put(',');
        String(View(m->name));
        Put(':');
        if (!WriteCanonical(m->value, order, omit)) return false;
      }
      Put('}');
      order.resize(base);
      return true;
    }
    if (v.IsArray()) {
      Put('[');
      bool first = true;
      for (const auto& e : v.GetArray()) {
        if (!first) Put(',');
        first = false;
        if (!WriteCanonical(e, order, omit)) return false;
      }
      Put(']');
      return true;
    }
    return Scalar(v);
  }

  void String(std::string_view s) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    // Room for every byte escaped as \u00XX, the quotes, and a 16-byte store past the text.
    char* w = Reserve(6 * s.size() + 2 + 16);
    *w++ = '"';
    const char* p = s.data();
    const char* const end = p + s.size();
    while (p != end) {
#if defined(__SSE2__)
      if (end - p >= 16) {
        // Copy a block of 16 bytes whole, keeping the part before the first byte to escape.
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        const __m128i control = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1F)), v);
        const __m128i special = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                                                          _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
                                             control);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(w), v);
        const int mask = _mm_movemask_epi8(special);
        const int plain = mask == 0 ? 16 : std::countr_zero(static_cast<unsigned>(mask));
        p += plain;
        w += plain;
        if (mask == 0) continue;
      }
#endif
      const char ch = *p++;
      const auto c = static_cast<unsigned char>(ch);
      const char e = kEscapes[c];
      if (e == 0) [[likely]] {
        *w++ = ch;
      } else {
        *w++ = '\\';
        *w++ = e;
        if (e == 'u') {
          *w++ = '0';
          *w++ = '0';
          *w++ = kHex[c >> 4];
          *w++ = kHex[c & 0xF];
        }
      }
    }
    *w++ = '"';
    pos_ = w;
  }

 private:
  bool Scalar(const Value& v) {
    switch (v.GetType()) {
      case rapidjson::kNullType:
        Append("null");
        return true;
      case rapidjson::kFalseType:
        Append("false");
        return true;
      case rapidjson::kTrueType:
        Append("true");
        return true;
      case rapidjson::kStringType:
        String(View(v));
        return true;
      case rapidjson::kNumberType: {
        char* w = Reserve(32);
        if (v.IsDouble()) {
          const double d = v.GetDouble();
          if (rapidjson::internal::Double(d).IsNanOrInf()) return false;
          pos_ = rapidjson::internal::dtoa(d, w);
        } else if (v.IsInt64()) {
          pos_ = rapidjson::internal::i64toa(v.GetInt64(), w);
        } else {
          pos_ = rapidjson::internal::u64toa(v.GetUint64(), w);
        }
        return true;
      }
      default:
        return true;  // containers are written by the callers
    }
  }

  void Put(char c) {
    *Reserve(1) = c;
    ++pos_;
  }
  void Append(std::string_view s) {
    std::memcpy(Reserve(s.size()), s.data(), s.size());
    pos_ += s.size();
  }

  // Where to write `n` more bytes.
  char* Reserve(std::size_t n) {
    if (static_cast<std::size_t>(limit_ - pos_) < n) [[unlikely]] {
      const std::size_t used = static_cast<std::size_t>(pos_ - buffer_.get());
      const std::size_t capacity = std::max<std::size_t>({256, 2 * used, used + n});
      auto bigger = std::make_unique_for_overwrite<char[]>(capacity);
      if (used > 0) std::memcpy(bigger.get(), buffer_.get(), used);
      buffer_ = std::move(bigger);
      pos_ = buffer_.get() + used;
      limit_ = buffer_.get() + capacity;
    }
    return pos_;
  }

  std::unique_ptr<char[]> buffer_;
  char* pos_ = nullptr;
  char* limit_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// Copying.

// Sends `v` to `out` as SAX events, strings by reference. Recursion is bounded by the nesting of
// `v` (kMaxDepth for what ParseUntrusted built).
bool EmitSharingStrings(const Value& v, Document& out) {
  if (v.IsObject()) {
    out.StartObject();
    for (const auto& m : v.GetObject()) {
      out.Key(m.name.GetString(), m.name.GetStringLength(), false);
      EmitSharingStrings(m.value, out);
    }
    return out.EndObject(v.MemberCount());
  }
  if (v.IsArray()) {
    out.StartArray();
    for (const auto& e : v.GetArray()) EmitSharingStrings(e, out);
    return out.EndArray(v.Size());
  }
  if (v.IsString()) return out.String(v.GetString(), v.GetStringLength(), false);
  return v.Accept(out);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// RequestArena.

namespace {

constexpr std::size_t kArenaChunk = 64 * 1024;
// What one thread keeps between requests, and what all of them keep together.
constexpr std::size_t kMaxThreadBuffer = 4 * 1024 * 1024;
constexpr std::size_t kRetainedBudget = 32 * 1024 * 1024;
std::atomic<std::size_t> retainedBytes{0};

struct ThreadBuffer {
  std::unique_ptr<char[]> data;
  std::size_t size = 0;
  bool inUse = false;

  ~ThreadBuffer() { retainedBytes -= size; }

  // Replaces the buffer by one of `wanted` bytes, if the budget and the heap allow. Called from a
  // destructor: never throws.
  void GrowTo(std::size_t wanted) noexcept {
    std::size_t retained = retainedBytes.load();
    do {
      if (retained - size + wanted > kRetainedBudget) return;
    } while (!retainedBytes.compare_exchange_weak(retained, retained - size + wanted));
    try {
      data = std::make_unique_for_overwrite<char[]>(wanted);
      size = wanted;
    } catch (const std::bad_alloc&) {
      retainedBytes -= wanted - size;  // keep the old buffer
    }
  }
};

thread_local ThreadBuffer threadBuffer;

}  // namespace

RequestArena::RequestArena() {
  if (!threadBuffer.inUse && threadBuffer.size > 0) {
    threadBuffer.inUse = true;
    ownsThreadBuffer_ = true;
    allocator_.emplace(threadBuffer.data.get(), threadBuffer.size, kArenaChunk);
  } else {
    allocator_.emplace(kArenaChunk);
  }
}

RequestArena::~RequestArena() {
  const std::size_t used = allocator_->Size();
  allocator_.reset();  // frees the chunks added beyond the thread's buffer
  if (ownsThreadBuffer_ || !threadBuffer.inUse) {
    // Keep room for a request like this one next time, and a quarter more (whole chunks).
    const std::size_t headroom = used + used / 4 + kArenaChunk;
    const std::size_t wanted = std::min(kMaxThreadBuffer, headroom / kArenaChunk * kArenaChunk);
    if (wanted > threadBuffer.size) threadBuffer.GrowTo(wanted);
    threadBuffer.inUse = false;
  }
}

namespace {

// Where the count of values in `text` (member names included) passes `limit`, or npos. Builds
// nothing and assumes nothing about validity; for valid JSON the count is the parser's: every value
// but the root follows a `[`, `{`, `,` or `:` of its own (the bracket of an empty container
// excepted).
std::size_t ValueBoundPassedAt(std::string_view text, std::size_t limit) {
  std::size_t count = 1;
  const std::size_t n = text.size();
  for (std::size_t i = 0; i < n; ++i) {
    const char c = text[i];
    if (c == '"') {  // to the closing quote
      for (++i; i < n && text[i] != '"'; ++i) {
        if (text[i] == '\\') ++i;
      }
      continue;
    }
    if (c == ',' || c == ':') {
      ++count;
    } else if (c == '[' || c == '{') {
      std::size_t j = i + 1;
      while (j < n && (text[j] == ' ' || text[j] == '\n' || text[j] == '\r' || text[j] == '\t'))
        ++j;
      if (j < n && text[j] != ']' && text[j] != '}') ++count;
    } else {
      continue;
    }
    if (count > limit) return i;
  }
  return std::string_view::npos;
}

Status Parse(std::string_view text, Document& out, bool borrow, std::size_t maxValues) {
  // A text of L bytes holds at most (L + 1) / 2 values: only longer ones can pass the bound, and
  // they are counted before anything is built (the parser's own loop stays as fast as it was).
  if ((text.size() + 1) / 2 > maxValues) {
    if (std::size_t at = ValueBoundPassedAt(text, maxValues); at != std::string_view::npos) {
      return Status::TooLarge("JSON has more than " + std::to_string(maxValues) +
                              " values (at offset " + std::to_string(at) + ")");
    }
  }
  Parser parser(text, out, borrow);
  auto generate = [&parser](Document&) { return parser.Run(); };
  out.Populate(generate);
  const ParseError& e = parser.error();
  if (e.tooDeep) {
    return Status::InvalidArgument("JSON nested deeper than " + std::to_string(kMaxDepth) +
                                   " levels");
  }
  if (e.code != rapidjson::kParseErrorNone) {
    return Status::InvalidArgument(std::string(rapidjson::GetParseError_En(e.code)) +
                                   " at offset " + std::to_string(e.offset));
  }
  return Status::Ok();
}

}  // namespace

Status ParseUntrusted(std::string_view text, Document& out, std::size_t maxValues) {
  return Parse(text, out, /*borrow=*/false, maxValues);
}

Status ParseUntrustedBorrowing(std::string_view text, Document& out, std::size_t maxValues) {
  return Parse(text, out, /*borrow=*/true, maxValues);
}

Value Copy(const Value& value, Allocator& alloc) {
  if (!value.IsObject() && !value.IsArray()) return Value(value, alloc);
  // One SAX walk into a builder sharing `alloc`; EndObject/EndArray size every container exactly.
  Document builder(&alloc);
  auto generate = [&value](Document& handler) { return value.Accept(handler); };
  builder.Populate(generate);
  Value out;
  out = static_cast<Value&>(builder);  // moves
  return out;
}

Value CopySharingStrings(const Value& value, Allocator& alloc) {
  Document builder(&alloc);
  auto generate = [&value](Document& handler) { return EmitSharingStrings(value, handler); };
  builder.Populate(generate);
  Value out;
  out = static_cast<Value&>(builder);  // moves
  return out;
}

namespace {

// `v` itself, not a copy: the same member list, elements or string. Values of a pool allocator
// never free what they point to, so two of them may share it.
Value Alias(const Value& v) {
  Value out;
  std::memcpy(static_cast<void*>(&out), &v, sizeof(Value));
  return out;
}

// A copy of object `v`'s member list whose names and values are `v`'s own.
Value CopyMembers(const Value& v, Allocator& alloc) {
  Value out(rapidjson::kObjectType);
  for (const auto& m : v.GetObject()) {
    Value name = Alias(m.name);
    Value value = Alias(m.value);
    out.AddMember(name, value, alloc);
  }
  return out;
}

}  // namespace

std::string Serialize(const Value& value) {
  TextWriter w;
  w.Write(value);
  return w.Text();
}

std::string SerializeCanonical(const Value& value, const Value::Member* omit) {
  TextWriter w;
  std::vector<const Value::Member*> order;
  order.reserve(64);
  w.WriteCanonical(value, order, omit);
  return w.Text();
}

void AppendString(std::string& out, std::string_view s) {
  TextWriter w;
  w.String(s);
  out += w.Text();
}

namespace {

// The first member of `object` named `key`, or nullptr. Names are compared by length and first
// byte before their bytes, which rules most out without a call to memcmp.
template <typename V>
V* FindIn(V& object, std::string_view key) {
  for (auto it = object.MemberBegin(), end = object.MemberEnd(); it != end; ++it) {
    const Value& name = it->name;
    if (name.GetStringLength() != key.size()) continue;
    const char* s = name.GetString();
    if (key.empty() || (s[0] == key[0] && std::memcmp(s, key.data(), key.size()) == 0)) {
      return &it->value;
    }
  }
  return nullptr;
}

}  // namespace

const Value* Find(const Value* object, std::string_view key) {
  if (object == nullptr || !object->IsObject()) return nullptr;
  return FindIn(*object, key);
}

const Value* FindNamed(const Value* array, std::string_view key, std::string_view value) {
  if (array == nullptr || !array->IsArray()) return nullptr;
  for (const auto& e : array->GetArray()) {
    if (StringOr(&e, key) == value) return &e;
  }
  return nullptr;
}

Value* FindMutable(Value* object, std::string_view key) {
  if (object == nullptr || !object->IsObject()) return nullptr;
  return FindIn(*object, key);
}

Value CopyAlong(const Value& value,
                std::initializer_list<std::initializer_list<std::string_view>> paths,
                Allocator& alloc) {
  if (!value.IsObject()) return Copy(value, alloc);
  Value out = CopyMembers(value, alloc);
  for (const auto& path : paths) {
    Value* level = &out;
    for (std::string_view key : path) {
      Value* member = FindIn(*level, key);
      if (member == nullptr || !member->IsObject()) break;
      // (Paths with the same start copy it again: a copy of the copy, as cheap and as correct.)
      *member = CopyMembers(*member, alloc);  // the alias it replaces frees nothing
      level = member;
    }
  }
  return out;
}

const Value* Path(const Value* root, std::initializer_list<std::string_view> keys) {
  const Value* v = root;
  for (auto k : keys) {
    v = Find(v, k);
    if (v == nullptr) return nullptr;
  }
  return v;
}

std::string_view StringOr(const Value* object, std::string_view key, std::string_view fallback) {
  const Value* v = Find(object, key);
  return (v != nullptr && v->IsString()) ? View(*v) : fallback;
}

void Set(Value& object, std::string_view key, const Value& value, Allocator& alloc) {
  if (!object.IsObject()) object.SetObject();
  Value copy = Copy(value, alloc);
  auto it = object.FindMember(Value(Ref(key)));
  if (it != object.MemberEnd()) {
    it->value = copy;  // moves
  } else {
    object.AddMember(Value(key.data(), static_cast<rapidjson::SizeType>(key.size()), alloc), copy,
                     alloc);
  }
}

void SetString(Value& object, std::string_view key, std::string_view value, Allocator& alloc) {
  // An empty view may have a null data() (StringOr's default), which RapidJSON asserts against.
  Value v(value.empty() ? "" : value.data(), static_cast<rapidjson::SizeType>(value.size()), alloc);
  if (!object.IsObject()) object.SetObject();
  auto it = object.FindMember(Value(Ref(key)));
  if (it != object.MemberEnd()) {
    it->value = v;
  } else {
    object.AddMember(Value(key.data(), static_cast<rapidjson::SizeType>(key.size()), alloc), v,
                     alloc);
  }
}

Value& EnsureObject(Value& object, std::string_view key, Allocator& alloc) {
  if (!object.IsObject()) object.SetObject();
  auto it = object.FindMember(Value(Ref(key)));
  if (it == object.MemberEnd()) {
    object.AddMember(Value(key.data(), static_cast<rapidjson::SizeType>(key.size()), alloc),
                     Value(rapidjson::kObjectType), alloc);
    return (object.MemberEnd() - 1)->value;
  }
  if (!it->value.IsObject()) it->value.SetObject();
  return it->value;
}

bool Remove(Value& object, std::string_view key) {
  if (!object.IsObject()) return false;
  return object.EraseMember(Value(Ref(key)));
}

void AppendEscapedPointerToken(std::string& out, std::string_view token) {
  std::size_t specials = 0;
  for (char c : token) specials += (c == '~' || c == '/') ? 1 : 0;
  if (specials == 0) {
    out += token;
    return;
  }
  std::size_t w = out.size();
  out.resize(w + token.size() + specials);
  for (char c : token) {
    if (c == '~' || c == '/') {
      out[w++] = '~';
      out[w++] = c == '~' ? '0' : '1';
    } else {
      out[w++] = c;
    }
  }
}

std::string EscapePointerToken(std::string_view token) {
  std::string out;
  out.reserve(token.size() + 4);
  AppendEscapedPointerToken(out, token);
  return out;
}

std::string UnescapePointerToken(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  for (size_t i = 0; i < token.size(); ++i) {
    if (token[i] == '~' && i + 1 < token.size() && (token[i + 1] == '0' || token[i + 1] == '1')) {
      out += token[i + 1] == '0' ? '~' : '/';
      ++i;
    } else {
      out += token[i];
    }
  }
  return out;
}

}  // namespace iw::json
