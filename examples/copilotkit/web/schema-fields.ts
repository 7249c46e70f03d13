/**
 * What the interrupt form shows for a `responseSchema` (no DOM, so node:test covers it): one
 * field per property, an enum as its values (titled by `enumNames`), a boolean as approve/deny,
 * numbers parsed.
 */

export type Schema = Record<string, unknown>;

export interface Field {
  name: string;
  schema: Schema;
  title: string;
  required: boolean;
}

export interface Choice {
  label: string;
  value: unknown;
}

/** The properties of an object schema, in schema order. */
export function fieldsOf(schema: Schema | undefined): Field[] {
  const properties = (schema?.properties ?? {}) as Record<string, Schema>;
  const required = new Set((schema?.required ?? []) as string[]);
  return Object.entries(properties).map(([name, property]) => ({
    name,
    schema: property,
    title: typeof property.title === "string" ? property.title : name,
    required: required.has(name),
  }));
}

/** The buttons for a field, or `null` when it needs typing (a string, a number). */
export function choicesOf(field: Field): Choice[] | null {
  if (Array.isArray(field.schema.enum)) {
    // A titled option (a flight's times, price, "needs approval") reads as its title
    // (`enumNames`, the MCP form subset's legacy titles); the value is what is sent.
    const names = field.schema.enumNames;
    const titles = Array.isArray(names) && names.length === field.schema.enum.length ? names : [];
    return field.schema.enum.map((value, index) => {
      const title = titles[index];
      return { label: typeof title === "string" ? title : String(value), value };
    });
  }
  if (field.schema.type === "boolean") {
    return [
      { label: "Approve", value: true },
      { label: "Deny", value: false },
    ];
  }
  return null;
}

/** A question answered by one click: a single field with choices. */
export function isOneClick(fields: Field[]): boolean {
  const [only] = fields;
  return fields.length === 1 && only !== undefined && choicesOf(only) !== null;
}

/** Typed text as the field's JSON type; PauseMesh's schema check judges the rest. */
export function parsed(field: Field, text: string): unknown {
  const type = field.schema.type;
  return (type === "number" || type === "integer") && text.trim() !== "" ? Number(text) : text;
}
