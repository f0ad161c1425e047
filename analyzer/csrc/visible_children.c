// Two reads of a tree-sitter node from the parse tree's own child arrays: its visible children
// (the nodes `ts_node_child(node, i)` gives, in order) listed in one pass, and its child by
// field (what `ts_node_child_by_field_id` gives).
//
// Why: the body walk (src/children.rs, src/cparse.rs) visits most nodes of every tree, and a
// tree cursor's step to the next sibling costs ~700 instructions (it climbs out of and back
// into the hidden repetition nodes between two statements, recomputing positions and
// descendant counts); listing the children of a node here costs tens per child. A field lookup
// through the public API makes a node of every child it passes (~420 instructions); the search
// here makes only the one it returns (~230).
//
// This file reads tree-sitter's private headers (subtree.h, tree.h, language.h), found beside
// the public one of the locked tree-sitter release: it is compiled against the same headers as
// the library, so a release that changes the layout fails the build here, never the walk.
// The walk does what node.c's child iterator does: a child is visible when its subtree is or
// the production gives it an alias; a hidden child with visible children is descended into.

#include "subtree.h"
#include "tree.h"
#include "language.h"
#include "length.h"

// Deeper hidden nesting than this is not produced by the C grammar (repetitions are balanced):
// the caller then lists the children with the public API instead.
#define MAX_HIDDEN_DEPTH 256
#define TOO_DEEP UINT32_MAX

static uint32_t list_children(const TSTree *tree, Subtree parent, Length position,
                              TSNode *out, uint32_t n, uint32_t cap, uint32_t depth) {
  if (depth > MAX_HIDDEN_DEPTH) return TOO_DEEP;
  const TSSymbol *aliases =
      ts_language_alias_sequence(tree->language, parent.ptr->production_id);
  const Subtree *children = ts_subtree_children(parent);
  uint32_t structural = 0;
  for (uint32_t i = 0; i < parent.ptr->child_count; i++) {
    const Subtree *child = &children[i];
    TSSymbol alias = 0;
    if (!ts_subtree_extra(*child)) {
      if (aliases) alias = aliases[structural];
      structural++;
    }
    if (i > 0) position = length_add(position, ts_subtree_padding(*child));
    if (ts_subtree_visible(*child) || alias) {
      // what ts_node_new makes (node.c, another unit: a call per child otherwise)
      out[n++] = (TSNode){
          {position.bytes, position.extent.row, position.extent.column, alias}, child, tree};
      if (n == cap) return n;
    } else if (ts_subtree_visible_child_count(*child) > 0) {
      n = list_children(tree, *child, position, out, n, cap, depth + 1);
      if (n == TOO_DEEP || n == cap) return n;
    }
    position = length_add(position, ts_subtree_size(*child));
  }
  return n;
}

// Writes `node`'s visible children to `out`, the first `cap` of them; returns how many it wrote,
// or UINT32_MAX when its hidden nodes nest too deep.
uint32_t probegen_visible_children(TSNode node, TSNode *out, uint32_t cap) {
  Subtree subtree = *(const Subtree *)node.id;
  if (cap == 0 || ts_subtree_child_count(subtree) == 0) return 0;
  Length position = {node.context[0], {node.context[1], node.context[2]}};
  return list_children(node.tree, subtree, position, out, 0, cap, 0);
}

// The first visible child of `parent` (a hidden node with visible children), as ts_node_child
// gives it at index 0.
static TSNode first_visible_child(const TSTree *tree, Subtree parent, Length position,
                                  bool *too_deep) {
  TSNode first = {{0, 0, 0, 0}, NULL, NULL};
  if (list_children(tree, parent, position, &first, 0, 1, 0) == TOO_DEEP) *too_deep = true;
  return first;
}

// The child ts_node_child_by_field_id(node, field) gives (a node whose id is NULL: none), by
// the same steps, computing no node but the one it returns: the production's entries for the
// field in order; an inherited one searched in its hidden child (the last one in place of the
// node); a visible or aliased child returned; a hidden one with visible children gives its
// first; one without, the next entry. `too_deep` is set when hidden nodes nest deeper than
// MAX_HIDDEN_DEPTH: the caller then asks tree-sitter.
TSNode probegen_child_by_field(TSNode node, TSFieldId field, bool *too_deep) {
  const TSNode none = {{0, 0, 0, 0}, NULL, NULL};
  const TSTree *tree = node.tree;
  for (uint32_t depth = 0; depth <= MAX_HIDDEN_DEPTH; depth++) {
    Subtree parent = *(const Subtree *)node.id;
    if (!field || ts_subtree_child_count(parent) == 0) return none;
    const TSFieldMapEntry *entry, *end;
    ts_language_field_map(tree->language, parent.ptr->production_id, &entry, &end);
    while (entry < end && entry->field_id < field) entry++;
    while (end > entry && end[-1].field_id > field) end--;
    if (entry == end) return none;
    const TSSymbol *aliases =
        ts_language_alias_sequence(tree->language, parent.ptr->production_id);
    const Subtree *children = ts_subtree_children(parent);
    Length position = {node.context[0], {node.context[1], node.context[2]}};
    uint32_t structural = 0;
    bool descend = false;
    for (uint32_t i = 0; i < parent.ptr->child_count; i++) {
      const Subtree *child = &children[i];
      if (i > 0) position = length_add(position, ts_subtree_padding(*child));
      if (!ts_subtree_extra(*child)) {
        TSSymbol alias = aliases ? aliases[structural] : 0;
        uint32_t index = structural++;
        if (index >= entry->child_index) {
          TSNode found = {
              {position.bytes, position.extent.row, position.extent.column, alias}, child, tree};
          if (entry->inherited) {
            if (entry + 1 == end) {
              node = found;
              descend = true;
              break;
            }
            TSNode inner = probegen_child_by_field(found, field, too_deep);
            if (inner.id) return inner;
            if (++entry == end) return none;
          } else if (ts_subtree_visible(*child) || alias) {
            return found;
          } else if (ts_subtree_visible_child_count(*child) > 0) {
            return first_visible_child(tree, *child, position, too_deep);
          } else if (++entry == end) {
            return none;
          }
        }
      }
      position = length_add(position, ts_subtree_size(*child));
    }
    if (!descend) return none;
  }
  *too_deep = true;
  return none;
}
