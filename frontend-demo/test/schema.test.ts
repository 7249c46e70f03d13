import assert from "node:assert/strict";
import { test } from "node:test";
import { formModel, validate } from "../src/schema.js";

const flightSchema = {
  type: "object",
  properties: {
    flight: { type: "string", enum: ["LH 1172", "TP 579", "FR 8401"], title: "Flight" },
  },
  required: ["flight"],
  additionalProperties: false,
};

test("an enum property becomes a choice field with its options in order", () => {
  const model = formModel(flightSchema);
  assert.equal(model.fields.length, 1);
  const [field] = model.fields;
  assert.equal(field?.kind, "choice");
  assert.equal(field?.required, true);
  assert.deepEqual(field?.options, ["LH 1172", "TP 579", "FR 8401"]);
});

test("one of the offered flights is accepted", () => {
  assert.deepEqual(validate(flightSchema, { flight: "TP 579" }), []);
});

test("a flight that was not offered is refused with a readable message", () => {
  const problems = validate(flightSchema, { flight: "XX 999" });
  assert.equal(problems.length, 1);
  assert.equal(problems[0]?.field, "flight");
  assert.match(problems[0]?.message ?? "", /Flight must be one of: LH 1172, TP 579, FR 8401/);
});

test("a missing required answer and an unknown field are both reported", () => {
  const problems = validate(flightSchema, { seat: "12A" });
  assert.deepEqual(
    problems.map((p) => p.message),
    ["Flight is required.", "“seat” is not part of this question."],
  );
});

test("string, number and integer constraints are checked", () => {
  const schema = {
    type: "object",
    properties: {
      name: { type: "string", minLength: 1, maxLength: 5, pattern: "^[A-Z]" },
      passengers: { type: "integer", minimum: 1, maximum: 9 },
      budget: { type: "number", exclusiveMinimum: 0 },
    },
  };
  assert.deepEqual(validate(schema, { name: "Ann", passengers: 2, budget: 10.5 }), []);
  const messages = validate(schema, { name: "", passengers: 2.5, budget: 0 }).map((p) => p.message);
  assert.deepEqual(messages, [
    "Name cannot be empty.",
    "Name is not in the expected format.",
    "Passengers must be a whole number.",
    "Budget must be more than 0.",
  ]);
  assert.deepEqual(
    validate(schema, { name: "abcdef", passengers: 12 }).map((p) => p.message),
    [
      "Name can have at most 5 characters.",
      "Name is not in the expected format.",
      "Passengers must be at most 9.",
    ],
  );
});

test("fields without a title get a readable label and a kind from their type", () => {
  const model = formModel({
    properties: { returnDate: { type: "string" }, ok: { type: "boolean" }, extra: {} },
  });
  assert.deepEqual(
    model.fields.map((f) => [f.label, f.kind, f.required]),
    [
      ["Return Date", "text", false],
      ["Ok", "boolean", false],
      ["Extra", "json", false],
    ],
  );
});
