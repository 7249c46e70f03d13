/** The interrupt form's reading of a `responseSchema` (web/schema-fields.ts). */

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { choicesOf, fieldsOf, isOneClick, parsed } from "../web/schema-fields.js";

const FLIGHT = {
  type: "object",
  properties: { flight: { type: "string", title: "Flight", enum: ["PM101", "PM202"] } },
  required: ["flight"],
};
const APPROVAL = { type: "object", properties: { approved: { type: "boolean" } } };
const PASSENGER = {
  type: "object",
  properties: {
    name: { type: "string", title: "Name" },
    bags: { type: "integer" },
    seat: { type: "string", enum: ["aisle", "window"] },
  },
  required: ["name"],
};

describe("the interrupt form", () => {
  test("an enum is one button per value and a single enum answers on one click", () => {
    const fields = fieldsOf(FLIGHT);
    assert.deepEqual(
      fields.map((field) => [field.name, field.title, field.required]),
      [["flight", "Flight", true]],
    );
    const [flight] = fields;
    assert.ok(flight);
    assert.deepEqual(choicesOf(flight), [
      { label: "PM101", value: "PM101" },
      { label: "PM202", value: "PM202" },
    ]);
    assert.equal(isOneClick(fields), true);
  });

  test("an enum with enumNames reads as its titles and sends its values", () => {
    const [flight] = fieldsOf({
      type: "object",
      properties: {
        flight: {
          type: "string",
          enum: ["PM101", "PM404"],
          enumNames: ["PM101 · 07:05–09:10 · 89 EUR", "PM404 · 09:30–11:35 · 640 EUR · business · needs approval"],
        },
      },
    });
    assert.ok(flight);
    assert.deepEqual(choicesOf(flight), [
      { label: "PM101 · 07:05–09:10 · 89 EUR", value: "PM101" },
      { label: "PM404 · 09:30–11:35 · 640 EUR · business · needs approval", value: "PM404" },
    ]);
  });

  test("a boolean is approve or deny", () => {
    const [approved] = fieldsOf(APPROVAL);
    assert.ok(approved);
    assert.deepEqual(choicesOf(approved), [
      { label: "Approve", value: true },
      { label: "Deny", value: false },
    ]);
    assert.equal(approved.title, "approved");
    assert.equal(isOneClick(fieldsOf(APPROVAL)), true);
  });

  test("several fields are a form: typed fields, choices, numbers sent as numbers", () => {
    const fields = fieldsOf(PASSENGER);
    const [name, bags, seat] = fields;
    assert.ok(name && bags && seat);
    assert.equal(isOneClick(fields), false);
    assert.equal(choicesOf(name), null);
    assert.equal(choicesOf(bags), null);
    assert.deepEqual(choicesOf(seat)?.map((choice) => choice.value), ["aisle", "window"]);
    assert.equal(parsed(bags, "2"), 2);
    assert.equal(parsed(bags, " "), " ");
    assert.equal(parsed(name, "2"), "2");
  });

  test("a question without a schema has no fields (cancel is still offered)", () => {
    assert.deepEqual(fieldsOf(undefined), []);
    assert.equal(isOneClick([]), false);
  });
});
