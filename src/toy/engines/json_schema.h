// engines/json_schema.h — JSON Schema to a GBNF grammar (grammar.h) whose sentences are the JSON
// texts that validate against the schema.
//
// Supported: type (one or a list), properties / required / additionalProperties, items /
// minItems / maxItems, minLength / maxLength, enum, const, anyOf, $ref into the same document
// (#, #/$defs/…, #/definitions/…, recursion included). Other keywords (title, description,
// default, examples, $schema, …) only annotate and are ignored. Keywords that constrain values in ways a
// grammar here cannot (pattern, format, minimum, multipleOf, oneOf, allOf, not, …) are refused
// with a GrammarError naming the keyword and where it is, rather than silently not enforced.
//
// Properties come in the order the schema lists them; optional ones may be left out; properties
// the schema does not list are never generated. Numbers have at most 16 integer and 16 fraction
// digits and a two-digit exponent, whitespace between tokens is bounded, so a grammar's texts
// end whenever its strings and arrays do.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace toy {

class JsonGrammarBuilder {
 public:
  using json = nlohmann::ordered_json;

  // The name of a rule matching the JSON texts valid under `schema` (followed by optional
  // whitespace); `document` is the schema's root, where $ref points. Adds the rules it needs.
  // Throws GrammarError ("schema at /properties/age: 'minimum' is not supported").
  std::string value(const json& schema, const json& document, const std::string& hint);
  // Any JSON object (response_format json_object).
  std::string any_object();
  // Adds `name ::= body` (a name of letters, digits and '-'), or returns an existing rule of that body.
  std::string rule(const std::string& name, const std::string& body);
  // Adds `root ::= body`, the start rule.
  void set_root(const std::string& body);
  // The GBNF text: `root` first, then the other rules.
  std::string gbnf() const;

  // A GBNF string literal matching exactly these bytes.
  static std::string literal(std::string_view bytes);

 private:
  std::string visit(const json& schema, const json& document, const std::string& hint, const std::string& path,
                    int depth);
  std::string object(const json& schema, const json& document, const std::string& hint, const std::string& path,
                     int depth);
  std::string array(const json& schema, const json& document, const std::string& hint, const std::string& path,
                    int depth);
  std::string string_rule(const json& schema, const std::string& path);
  std::string primitive(const std::string& name);  // space, string, number, value, ... (added on first use)
  std::string unique_name(const std::string& hint);

  std::vector<std::pair<std::string, std::string>> rules_;           // in order of creation
  std::map<std::string, std::string> by_body_;                       // body -> name (rules shared by identical bodies)
  std::set<std::string> taken_;                                      // rule names in use
  std::map<std::pair<const json*, std::string>, std::string> refs_;  // (document, $ref) -> rule
};

// The whole grammar of one schema (response_format json_schema): `root` is its value.
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema);

}  // namespace toy
