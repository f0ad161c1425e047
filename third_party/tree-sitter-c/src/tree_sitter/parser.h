#ifndef TREE_SITTER_PARSER_H_
#define TREE_SITTER_PARSER_H_

#ifdef __cplusplus
extern "C" {
#endif

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#define ts_builtin_sym_error ((TSSymbol)-1)
#define ts_builtin_sym_end 0
#define TREE_SITTER_SERIALIZATION_BUFFER_SIZE 1024

#ifndef TREE_SITTER_API_H_
typedef uint16_t TSStateId;
typedef uint16_t TSSymbol;
typedef uint16_t TSFieldId;
typedef struct TSLanguage TSLanguage;
typedef struct TSLanguageMetadata {
  uint8_t major_version;
  uint8_t minor_version;
  uint8_t patch_version;
} TSLanguageMetadata;
#endif

typedef struct {
  TSFieldId field_id;
  uint8_t child_index;
  bool inherited;
} TSFieldMapEntry;

// Used to index the field and supertype maps.
typedef struct {
  uint16_t index;
  uint16_t length;
} TSMapSlice;

typedef struct {
  bool visible;
  bool named;
  bool supertype;
} TSSymbolMetadata;

typedef struct TSLexer TSLexer;

struct TSLexer {
  int32_t lookahead;
  TSSymbol result_symbol;
  void (*advance)(TSLexer *, bool);
  void (*mark_end)(TSLexer *);
  uint32_t (*get_column)(TSLexer *);
  bool (*is_at_included_range_start)(const TSLexer *);
  bool (*eof)(const TSLexer *);
  void (*log)(const TSLexer *, const char *, ...);
};

typedef enum {
  TSParseActionTypeShift,
  TSParseActionTypeReduce,
  TSParseActionTypeAccept,
  TSParseActionTypeRecover,
} TSParseActionType;

typedef union {
  struct {
    uint8_t type;
    TSStateId state;
    bool extra;
    bool repetition;
  } shift;
  struct {
    uint8_t type;
    uint8_t child_count;
    TSSymbol symbol;
    int16_t dynamic_precedence;
    uint16_t production_id;
  } reduce;
  uint8_t type;
} TSParseAction;

typedef struct {
  uint16_t lex_state;
  uint16_t external_lex_state;
} TSLexMode;

typedef struct {
  uint16_t lex_state;
  uint16_t external_lex_state;
  uint16_t reserved_word_set_id;
} TSLexerMode;

typedef union {
  TSParseAction action;
  struct {
    uint8_t count;
    bool reusable;
  } entry;
} TSParseActionEntry;

typedef struct {
  int32_t start;
  int32_t end;
} TSCharacterRange;

struct TSLanguage {
  uint32_t abi_version;
  uint32_t symbol_count;
  uint32_t alias_count;
  uint32_t token_count;
  uint32_t external_token_count;
  uint32_t state_count;
  uint32_t large_state_count;
  uint32_t production_id_count;
  uint32_t field_count;
  uint16_t max_alias_sequence_length;
  const uint16_t *parse_table;
  const uint16_t *small_parse_table;
  const uint32_t *small_parse_table_map;
  const TSParseActionEntry *parse_actions;
  const char * const *symbol_names;
  const char * const *field_names;
  const TSMapSlice *field_map_slices;
  const TSFieldMapEntry *field_map_entries;
  const TSSymbolMetadata *symbol_metadata;
  const TSSymbol *public_symbol_map;
  const uint16_t *alias_map;
  const TSSymbol *alias_sequences;
  const TSLexerMode *lex_modes;
  bool (*lex_fn)(TSLexer *, TSStateId);
  bool (*keyword_lex_fn)(TSLexer *, TSStateId);
  TSSymbol keyword_capture_token;
  struct {
    const bool *states;
    const TSSymbol *symbol_map;
    void *(*create)(void);
    void (*destroy)(void *);
    bool (*scan)(void *, TSLexer *, const bool *symbol_whitelist);
    unsigned (*serialize)(void *, char *);
    void (*deserialize)(void *, const char *, unsigned);
  } external_scanner;
  const TSStateId *primary_state_ids;
  const char *name;
  const TSSymbol *reserved_words;
  uint16_t max_reserved_word_set_size;
  uint32_t supertype_count;
  const TSSymbol *supertype_symbols;
  const TSMapSlice *supertype_map_slices;
  const TSSymbol *supertype_map_entries;
  TSLanguageMetadata metadata;
};

static inline bool set_contains(const TSCharacterRange *ranges, uint32_t len, int32_t lookahead) {
  // probegen: an ASCII character is looked up among the first ranges (sorted by start, never
  // overlapping) instead of by a binary search over all of them (687 for an identifier
  // character: 10 steps per character of every identifier in the kernel). Same result.
  if (lookahead < 128) {
    for (uint32_t i = 0; i < len && ranges[i].start <= lookahead; i++) {
      if (lookahead <= ranges[i].end) return true;
    }
    return false;
  }
  uint32_t index = 0;
  uint32_t size = len - index;
  while (size > 1) {
    uint32_t half_size = size / 2;
    uint32_t mid_index = index + half_size;
    const TSCharacterRange *range = &ranges[mid_index];
    if (lookahead >= range->start && lookahead <= range->end) {
      return true;
    } else if (lookahead > range->end) {
      index = mid_index;
    }
    size -= half_size;
  }
  const TSCharacterRange *range = &ranges[index];
  return (lookahead >= range->start && lookahead <= range->end);
}

/*
 *  Lexer Macros
 */

#ifdef _MSC_VER
#define UNUSED __pragma(warning(suppress : 4101))
#else
#define UNUSED __attribute__((unused))
#endif

#define START_LEXER()           \
  bool result = false;          \
  bool skip = false;            \
  UNUSED                        \
  bool eof = false;             \
  int32_t lookahead;            \
  goto start;                   \
  next_state:                   \
  lexer->advance(lexer, skip);  \
  start:                        \
  skip = false;                 \
  lookahead = lexer->lookahead;

#define ADVANCE(state_value) \
  {                          \
    state = state_value;     \
    goto next_state;         \
  }

// probegen: ADVANCE_MAP(key, state, key, state, ..., ) as a switch on the lookahead instead of a
// linear scan of the pairs (a start state has 32: every space and identifier character of the
// kernel scanned them all). The keys of a map are distinct, so the first match of the scan is
// the only case; a duplicate would not compile. Up to 32 pairs, with or without the trailing
// comma the generator writes.
#define PG_MAP_ARG_N(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, _17, _18, _19, _20, _21, _22, _23, _24, _25, _26, _27, _28, _29, _30, _31, _32, _33, _34, _35, _36, _37, _38, _39, _40, _41, _42, _43, _44, _45, _46, _47, _48, _49, _50, _51, _52, _53, _54, _55, _56, _57, _58, _59, _60, _61, _62, _63, _64, _65, N, ...) N
#define PG_MAP_NARG(...) PG_MAP_ARG_N(__VA_ARGS__, 65, 64, 63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47, 46, 45, 44, 43, 42, 41, 40, 39, 38, 37, 36, 35, 34, 33, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1)
#define PG_MAP_CAT(a, b) PG_MAP_CAT_(a, b)
#define PG_MAP_CAT_(a, b) a##b
#define PG_MAP_CASE(k, v) case k: state = v; goto next_state;
#define PG_MAP_1(x)
#define PG_MAP_2(k, v) PG_MAP_CASE(k, v)
#define PG_MAP_3(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_1(__VA_ARGS__)
#define PG_MAP_4(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_2(__VA_ARGS__)
#define PG_MAP_5(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_3(__VA_ARGS__)
#define PG_MAP_6(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_4(__VA_ARGS__)
#define PG_MAP_7(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_5(__VA_ARGS__)
#define PG_MAP_8(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_6(__VA_ARGS__)
#define PG_MAP_9(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_7(__VA_ARGS__)
#define PG_MAP_10(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_8(__VA_ARGS__)
#define PG_MAP_11(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_9(__VA_ARGS__)
#define PG_MAP_12(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_10(__VA_ARGS__)
#define PG_MAP_13(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_11(__VA_ARGS__)
#define PG_MAP_14(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_12(__VA_ARGS__)
#define PG_MAP_15(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_13(__VA_ARGS__)
#define PG_MAP_16(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_14(__VA_ARGS__)
#define PG_MAP_17(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_15(__VA_ARGS__)
#define PG_MAP_18(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_16(__VA_ARGS__)
#define PG_MAP_19(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_17(__VA_ARGS__)
#define PG_MAP_20(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_18(__VA_ARGS__)
#define PG_MAP_21(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_19(__VA_ARGS__)
#define PG_MAP_22(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_20(__VA_ARGS__)
#define PG_MAP_23(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_21(__VA_ARGS__)
#define PG_MAP_24(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_22(__VA_ARGS__)
#define PG_MAP_25(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_23(__VA_ARGS__)
#define PG_MAP_26(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_24(__VA_ARGS__)
#define PG_MAP_27(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_25(__VA_ARGS__)
#define PG_MAP_28(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_26(__VA_ARGS__)
#define PG_MAP_29(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_27(__VA_ARGS__)
#define PG_MAP_30(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_28(__VA_ARGS__)
#define PG_MAP_31(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_29(__VA_ARGS__)
#define PG_MAP_32(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_30(__VA_ARGS__)
#define PG_MAP_33(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_31(__VA_ARGS__)
#define PG_MAP_34(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_32(__VA_ARGS__)
#define PG_MAP_35(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_33(__VA_ARGS__)
#define PG_MAP_36(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_34(__VA_ARGS__)
#define PG_MAP_37(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_35(__VA_ARGS__)
#define PG_MAP_38(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_36(__VA_ARGS__)
#define PG_MAP_39(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_37(__VA_ARGS__)
#define PG_MAP_40(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_38(__VA_ARGS__)
#define PG_MAP_41(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_39(__VA_ARGS__)
#define PG_MAP_42(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_40(__VA_ARGS__)
#define PG_MAP_43(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_41(__VA_ARGS__)
#define PG_MAP_44(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_42(__VA_ARGS__)
#define PG_MAP_45(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_43(__VA_ARGS__)
#define PG_MAP_46(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_44(__VA_ARGS__)
#define PG_MAP_47(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_45(__VA_ARGS__)
#define PG_MAP_48(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_46(__VA_ARGS__)
#define PG_MAP_49(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_47(__VA_ARGS__)
#define PG_MAP_50(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_48(__VA_ARGS__)
#define PG_MAP_51(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_49(__VA_ARGS__)
#define PG_MAP_52(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_50(__VA_ARGS__)
#define PG_MAP_53(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_51(__VA_ARGS__)
#define PG_MAP_54(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_52(__VA_ARGS__)
#define PG_MAP_55(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_53(__VA_ARGS__)
#define PG_MAP_56(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_54(__VA_ARGS__)
#define PG_MAP_57(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_55(__VA_ARGS__)
#define PG_MAP_58(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_56(__VA_ARGS__)
#define PG_MAP_59(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_57(__VA_ARGS__)
#define PG_MAP_60(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_58(__VA_ARGS__)
#define PG_MAP_61(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_59(__VA_ARGS__)
#define PG_MAP_62(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_60(__VA_ARGS__)
#define PG_MAP_63(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_61(__VA_ARGS__)
#define PG_MAP_64(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_62(__VA_ARGS__)
#define PG_MAP_65(k, v, ...) PG_MAP_CASE(k, v) PG_MAP_63(__VA_ARGS__)
#define ADVANCE_MAP(...)                                                \
  switch (lookahead) {                                                  \
    PG_MAP_CAT(PG_MAP_, PG_MAP_NARG(__VA_ARGS__))(__VA_ARGS__)          \
    default:                                                            \
      break;                                                            \
  }

#define SKIP(state_value) \
  {                       \
    skip = true;          \
    state = state_value;  \
    goto next_state;      \
  }

#define ACCEPT_TOKEN(symbol_value)     \
  result = true;                       \
  lexer->result_symbol = symbol_value; \
  lexer->mark_end(lexer);

#define END_STATE() return result;

/*
 *  Parse Table Macros
 */

#define SMALL_STATE(id) ((id) - LARGE_STATE_COUNT)

#define STATE(id) id

#define ACTIONS(id) id

#define SHIFT(state_value)            \
  {{                                  \
    .shift = {                        \
      .type = TSParseActionTypeShift, \
      .state = (state_value)          \
    }                                 \
  }}

#define SHIFT_REPEAT(state_value)     \
  {{                                  \
    .shift = {                        \
      .type = TSParseActionTypeShift, \
      .state = (state_value),         \
      .repetition = true              \
    }                                 \
  }}

#define SHIFT_EXTRA()                 \
  {{                                  \
    .shift = {                        \
      .type = TSParseActionTypeShift, \
      .extra = true                   \
    }                                 \
  }}

#define REDUCE(symbol_name, children, precedence, prod_id) \
  {{                                                       \
    .reduce = {                                            \
      .type = TSParseActionTypeReduce,                     \
      .symbol = symbol_name,                               \
      .child_count = children,                             \
      .dynamic_precedence = precedence,                    \
      .production_id = prod_id                             \
    },                                                     \
  }}

#define RECOVER()                    \
  {{                                 \
    .type = TSParseActionTypeRecover \
  }}

#define ACCEPT_INPUT()              \
  {{                                \
    .type = TSParseActionTypeAccept \
  }}

#ifdef __cplusplus
}
#endif

#endif  // TREE_SITTER_PARSER_H_
