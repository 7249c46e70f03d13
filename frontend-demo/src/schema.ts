// The part of JSON Schema an interrupt's responseSchema uses for a human answer: an object of
// named fields, each an enum, string, number, integer or boolean. The form is generated from it
// and answers are checked against it before they are sent; the server checks again with a full
// Draft 2020-12 validator, so this only needs to be right, not complete.

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

export type FieldKind = "choice" | "text" | "number" | "integer" | "boolean" | "json";

export interface Field {
  readonly name: string;
  readonly label: string;
  readonly description: string | undefined;
  readonly kind: FieldKind;
  readonly required: boolean;
  /** For "choice": the allowed values, in schema order. */
  readonly options: readonly Json[];
  /** For "choice": each option's title (`enumNames`, or `oneOf` entries' `title`), if any. */
  readonly titles: readonly (string | undefined)[];
  readonly schema: Record<string, unknown>;
}

export interface FormModel {
  readonly title: string | undefined;
  readonly description: string | undefined;
  readonly fields: readonly Field[];
}

/** Turns a responseSchema into the fields of a form. A schema without properties gets none. */
export function formModel(schema: unknown): FormModel {
  const root = asObject(schema);
  const properties = asObject(root["properties"]);
  const required = new Set(
    Array.isArray(root["required"]) ? root["required"].filter((v) => typeof v === "string") : [],
  );
  const fields = Object.entries(properties).map(([name, raw]) => {
    const property = asObject(raw);
    return {
      name,
      label: typeof property["title"] === "string" ? property["title"] : humanize(name),
      description: typeof property["description"] === "string" ? property["description"] : undefined,
      kind: fieldKind(property),
      required: required.has(name),
      options: choiceOptions(property),
      titles: choiceTitles(property),
      schema: property,
    };
  });
  return {
    title: typeof root["title"] === "string" ? root["title"] : undefined,
    description: typeof root["description"] === "string" ? root["description"] : undefined,
    fields,
  };
}

function fieldKind(property: Record<string, unknown>): FieldKind {
  if (choiceOptions(property).length > 0) return "choice";
  switch (property["type"]) {
    case "string":
      return "text";
    case "number":
      return "number";
    case "integer":
      return "integer";
    case "boolean":
      return "boolean";
    default:
      return "json";
  }
}

/** The titles a schema gives its options: `enumNames` beside `enum`, or `oneOf[].title`. */
export function choiceTitles(property: Record<string, unknown>): readonly (string | undefined)[] {
  const options = choiceOptions(property);
  const names = property["enumNames"];
  if (Array.isArray(property["enum"]) && Array.isArray(names)) {
    return options.map((_, i) => (typeof names[i] === "string" ? (names[i] as string) : undefined));
  }
  const oneOf = property["oneOf"] ?? property["anyOf"];
  if (Array.isArray(oneOf)) {
    return options.map((_, i) => {
      const title = asObject(oneOf[i])["title"];
      return typeof title === "string" ? title : undefined;
    });
  }
  return options.map(() => undefined);
}

function choiceOptions(property: Record<string, unknown>): readonly Json[] {
  if (Array.isArray(property["enum"])) return property["enum"] as Json[];
  if ("const" in property) return [property["const"] as Json];
  const oneOf = property["oneOf"] ?? property["anyOf"];
  if (Array.isArray(oneOf) && oneOf.every((o) => "const" in asObject(o))) {
    return oneOf.map((o) => asObject(o)["const"] as Json);
  }
  return [];
}

/** One problem with an answer, phrased for the person who gave it. */
export interface Problem {
  readonly field: string | undefined;
  readonly message: string;
}

/**
 * Checks an answer against the schema. Returns readable problems, empty when the answer is
 * acceptable. Unknown keywords are left to the server.
 */
export function validate(schema: unknown, value: Json): Problem[] {
  const root = asObject(schema);
  const problems: Problem[] = [];
  check(root, value, undefined, "Your answer", problems);
  return problems;
}

function check(
  schema: Record<string, unknown>,
  value: Json,
  field: string | undefined,
  label: string,
  problems: Problem[],
): void {
  const type = schema["type"];
  if (typeof type === "string" && !hasType(value, type)) {
    problems.push({ field, message: `${label} must be ${article(type)}.` });
    return;
  }
  const options = choiceOptions(schema);
  if (options.length > 0 && !options.some((option) => jsonEqual(option, value))) {
    problems.push({
      field,
      message: `${label} must be one of: ${options.map((o) => display(o)).join(", ")}.`,
    });
    return;
  }
  if (typeof value === "string") checkString(schema, value, field, label, problems);
  if (typeof value === "number") checkNumber(schema, value, field, label, problems);
  if (isObject(value)) checkObject(schema, value, field, problems);
}

function checkString(
  schema: Record<string, unknown>,
  value: string,
  field: string | undefined,
  label: string,
  problems: Problem[],
): void {
  const length = [...value].length;
  const min = schema["minLength"];
  const max = schema["maxLength"];
  if (typeof min === "number" && length < min) {
    problems.push({
      field,
      message:
        min === 1 ? `${label} cannot be empty.` : `${label} needs at least ${min} characters.`,
    });
  }
  if (typeof max === "number" && length > max) {
    problems.push({ field, message: `${label} can have at most ${max} characters.` });
  }
  const pattern = schema["pattern"];
  if (typeof pattern === "string") {
    let matches = true;
    try {
      matches = new RegExp(pattern, "u").test(value);
    } catch {
      // A pattern JavaScript cannot compile is the server's to judge.
    }
    if (!matches) problems.push({ field, message: `${label} is not in the expected format.` });
  }
}

function checkNumber(
  schema: Record<string, unknown>,
  value: number,
  field: string | undefined,
  label: string,
  problems: Problem[],
): void {
  const bounds: [string, (limit: number) => boolean, string][] = [
    ["minimum", (l) => value >= l, "at least"],
    ["maximum", (l) => value <= l, "at most"],
    ["exclusiveMinimum", (l) => value > l, "more than"],
    ["exclusiveMaximum", (l) => value < l, "less than"],
  ];
  for (const [keyword, ok, phrase] of bounds) {
    const limit = schema[keyword];
    if (typeof limit === "number" && !ok(limit)) {
      problems.push({ field, message: `${label} must be ${phrase} ${limit}.` });
    }
  }
}

function checkObject(
  schema: Record<string, unknown>,
  value: { [key: string]: Json },
  field: string | undefined,
  problems: Problem[],
): void {
  const properties = asObject(schema["properties"]);
  const required = Array.isArray(schema["required"]) ? schema["required"] : [];
  for (const name of required) {
    if (typeof name === "string" && !(name in value)) {
      const label = labelOf(properties[name], name);
      problems.push({ field: name, message: `${label} is required.` });
    }
  }
  for (const [name, item] of Object.entries(value)) {
    const property = properties[name];
    if (property === undefined) {
      if (schema["additionalProperties"] === false) {
        problems.push({ field: field ?? name, message: `“${name}” is not part of this question.` });
      }
      continue;
    }
    check(asObject(property), item, name, labelOf(property, name), problems);
  }
}

function labelOf(property: unknown, name: string): string {
  const title = asObject(property)["title"];
  return typeof title === "string" ? title : humanize(name);
}

function hasType(value: Json, type: string): boolean {
  switch (type) {
    case "string":
      return typeof value === "string";
    case "number":
      return typeof value === "number" && Number.isFinite(value);
    case "integer":
      return typeof value === "number" && Number.isInteger(value);
    case "boolean":
      return typeof value === "boolean";
    case "object":
      return isObject(value);
    case "array":
      return Array.isArray(value);
    case "null":
      return value === null;
    default:
      return true;
  }
}

function article(type: string): string {
  const names: Record<string, string> = {
    string: "text",
    number: "a number",
    integer: "a whole number",
    boolean: "yes or no",
    object: "a set of fields",
    array: "a list",
    null: "empty",
  };
  return names[type] ?? type;
}

/** How a value reads on a button or in a message. */
export function display(value: Json): string {
  if (typeof value === "string") return value;
  if (typeof value === "boolean") return value ? "Yes" : "No";
  return JSON.stringify(value);
}

export function jsonEqual(a: Json, b: Json): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((item, i) => jsonEqual(item, b[i] as Json));
  }
  if (isObject(a) && isObject(b)) {
    const keys = Object.keys(a);
    return (
      keys.length === Object.keys(b).length &&
      keys.every((k) => k in b && jsonEqual(a[k] as Json, b[k] as Json))
    );
  }
  return false;
}

function humanize(name: string): string {
  const words = name.replace(/[_-]+/g, " ").replace(/([a-z])([A-Z])/g, "$1 $2").trim();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

function isObject(value: unknown): value is { [key: string]: Json } {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function asObject(value: unknown): Record<string, unknown> {
  return isObject(value) ? value : {};
}
