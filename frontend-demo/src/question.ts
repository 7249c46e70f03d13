// The pending interrupt cohort as a form: one fieldset per interrupt, controls generated from
// its responseSchema. With one interrupt whose answer is a single choice, each option is a
// button that answers at once; otherwise options toggle and "Send answer" submits the batch.

import type { Interrupt } from "@ag-ui/client";
import { deadlineText, optionParts } from "./chat";
import { display, type Field, formModel, type Json, validate } from "./schema";

export interface QuestionHandlers {
  /** The complete batch of answers, keyed by interrupt id. */
  readonly onAnswer: (answers: ReadonlyMap<string, Json>) => void;
  /** Without it there is no cancel button (an approver decides; withdrawing is not theirs). */
  readonly onCancel?: () => void;
  /** Prefix for element ids, so several forms can share a page. */
  readonly idPrefix?: string;
  /** The heading, instead of "The assistant needs your answer". */
  readonly heading?: string;
}

export class QuestionForm {
  private readonly form: HTMLFormElement;
  private readonly heading: HTMLHeadingElement;
  private readonly error: HTMLParagraphElement;
  private readonly blocks: InterruptBlock[];
  private readonly timers: number[] = [];
  private readonly tickers: number[] = [];
  private busy = false;

  constructor(
    private readonly container: HTMLElement,
    readonly interrupts: readonly Interrupt[],
    private readonly handlers: QuestionHandlers,
  ) {
    container.replaceChildren();
    const prefix = handlers.idPrefix ?? "question";
    this.heading = el("h2", { id: `${prefix}-heading`, tabindex: "-1" });
    this.heading.textContent =
      handlers.heading ??
      (interrupts.length === 1
        ? "The assistant needs your answer"
        : `The assistant needs ${interrupts.length} answers`);
    this.form = el("form", { novalidate: "", "aria-describedby": `${prefix}-error` });
    this.error = el("p", { id: `${prefix}-error`, class: "field-error", role: "alert" });
    this.error.hidden = true;
    const instant = interrupts.length === 1 && isSingleChoice(interrupts[0]);
    this.blocks = interrupts.map((interrupt, index) => {
      const block = new InterruptBlock(interrupt, `${prefix}-q${index}`, instant, () => this.submit());
      this.form.append(block.fieldset);
      return block;
    });
    const actions = el("div", { class: "question-actions" });
    if (!instant) {
      const send = el("button", { type: "submit", class: "primary" });
      send.textContent = interrupts.length === 1 ? "Send answer" : "Send answers";
      actions.append(send);
    }
    const onCancel = handlers.onCancel;
    if (onCancel !== undefined) {
      const cancel = el("button", { type: "button", class: "secondary" });
      cancel.textContent = interrupts.length === 1 ? "Cancel this question" : "Cancel these questions";
      cancel.addEventListener("click", () => {
        if (!this.busy) onCancel();
      });
      actions.append(cancel);
    }
    this.form.append(this.error, actions);
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.submit();
    });
    container.append(this.heading, this.form);
    container.hidden = false;
    this.scheduleExpiry();
  }

  /** Moves keyboard focus to the question, so the next Tab reaches its first option. */
  focus(): void {
    this.heading.focus();
  }

  setBusy(busy: boolean): void {
    this.busy = busy;
    this.form.setAttribute("aria-busy", String(busy));
    for (const block of this.blocks) block.setDisabled(busy);
  }

  showError(message: string): void {
    this.error.textContent = message;
    this.error.hidden = false;
  }

  destroy(): void {
    for (const timer of this.timers) clearTimeout(timer);
    for (const ticker of this.tickers) clearInterval(ticker);
    this.container.replaceChildren();
    this.container.hidden = true;
  }

  private submit(): void {
    if (this.busy) return;
    this.error.hidden = true;
    const answers = new Map<string, Json>();
    let firstInvalid: HTMLElement | undefined;
    for (const block of this.blocks) {
      const result = block.collect();
      if (result.ok) answers.set(block.interrupt.id, result.value);
      else firstInvalid ??= result.focus;
    }
    if (firstInvalid !== undefined) {
      this.showError("Please fix the answer marked above; it was not sent.");
      firstInvalid.focus();
      return;
    }
    this.handlers.onAnswer(answers);
  }

  private scheduleExpiry(): void {
    if (this.blocks.some((b) => b.expiresAt !== undefined)) {
      const ticker = window.setInterval(() => {
        for (const block of this.blocks) block.tick();
      }, 15_000);
      this.tickers.push(ticker);
    }
    for (const block of this.blocks) {
      const at = block.expiresAt;
      if (at === undefined) continue;
      const delay = at.getTime() - Date.now();
      if (delay <= 0) block.markExpired();
      // setTimeout holds at most ~24.8 days; a longer wait is re-checked on the next render.
      else if (delay < 2 ** 31 - 1) {
        this.timers.push(window.setTimeout(() => block.markExpired(), delay));
      }
    }
  }
}

type Collected = { ok: true; value: Json } | { ok: false; focus: HTMLElement };

class InterruptBlock {
  readonly fieldset: HTMLFieldSetElement;
  readonly expiresAt: Date | undefined;
  private readonly controls: FieldControl[];
  private readonly expiry: HTMLParagraphElement | undefined;
  private expired = false;

  constructor(
    readonly interrupt: Interrupt,
    prefix: string,
    instant: boolean,
    submit: () => void,
  ) {
    this.fieldset = el("fieldset", { class: "interrupt" });
    const legend = el("legend");
    legend.textContent = interrupt.message ?? "The assistant needs your input.";
    this.fieldset.append(legend);
    const model = formModel(interrupt.responseSchema);
    if (model.description !== undefined) {
      const p = el("p", { class: "hint" });
      p.textContent = model.description;
      this.fieldset.append(p);
    }
    const fields: readonly Field[] =
      interrupt.responseSchema === undefined ? [freeTextField()] : model.fields;
    this.controls = fields.map(
      (field) => new FieldControl(field, `${prefix}-${field.name}`, fields.length, instant, submit),
    );
    for (const control of this.controls) this.fieldset.append(control.element);
    const parsed = interrupt.expiresAt === undefined ? Number.NaN : Date.parse(interrupt.expiresAt);
    this.expiresAt = Number.isNaN(parsed) ? undefined : new Date(parsed);
    if (this.expiresAt !== undefined) {
      this.expiry = el("p", { class: "expiry" });
      this.fieldset.append(this.expiry);
      this.tick();
    }
  }

  /** The deadline in minutes ("Answer within 4 min"), kept current while it is shown. */
  tick(): void {
    if (this.expiry === undefined || this.expiresAt === undefined || this.expired) return;
    const text = deadlineText(this.expiresAt, new Date());
    this.expiry.textContent = text === undefined ? "Answer now" : `${text}.`;
  }

  collect(): Collected {
    if (this.expired) return { ok: false, focus: this.fieldset };
    const value: { [key: string]: Json } = {};
    for (const control of this.controls) {
      control.clearError();
      const raw = control.value();
      if (raw !== undefined) value[control.field.name] = raw;
    }
    const schema =
      this.interrupt.responseSchema ??
      ({ type: "object", properties: { answer: { type: "string" } } } as const);
    const problems = validate(schema, value);
    if (problems.length === 0) return { ok: true, value };
    let focus: HTMLElement = this.fieldset;
    for (const problem of problems.toReversed()) {
      const control = this.controls.find((c) => c.field.name === problem.field) ?? this.controls[0];
      if (control !== undefined) {
        control.showError(problem.message);
        focus = control.focusTarget();
      }
    }
    return { ok: false, focus };
  }

  setDisabled(disabled: boolean): void {
    for (const control of this.controls) control.setDisabled(disabled || this.expired);
  }

  markExpired(): void {
    this.expired = true;
    this.fieldset.classList.add("expired");
    if (this.expiry !== undefined && this.expiresAt !== undefined) {
      this.expiry.textContent = "This question expired. It can no longer be answered; cancel it to continue.";
      this.expiry.setAttribute("role", "alert");
    }
    for (const control of this.controls) control.setDisabled(true);
  }
}

class FieldControl {
  readonly element: HTMLElement;
  private readonly error: HTMLParagraphElement;
  private readonly inputs: (HTMLInputElement | HTMLTextAreaElement | HTMLButtonElement)[] = [];
  private selected: HTMLButtonElement | undefined;

  constructor(
    readonly field: Field,
    private readonly id: string,
    fieldCount: number,
    private readonly instant: boolean,
    submit: () => void,
  ) {
    this.error = el("p", { id: `${id}-error`, class: "field-error" });
    this.error.hidden = true;
    const options = field.kind === "boolean" ? [true, false] : field.options;
    if (field.kind === "choice" || field.kind === "boolean") {
      // The legend already asks the question when the answer is a single choice.
      const group = el("div", { role: "group", class: "choices", "aria-describedby": `${id}-error` });
      if (fieldCount > 1 || field.description !== undefined) {
        const label = el("p", { id: `${id}-label`, class: "field-label" });
        label.textContent = field.description ?? field.label;
        group.setAttribute("aria-labelledby", `${id}-label`);
        this.element = el("div", { class: "field" });
        this.element.append(label, group, this.error);
      } else {
        group.setAttribute("aria-label", field.label);
        this.element = el("div", { class: "field" });
        this.element.append(group, this.error);
      }
      for (const [index, option] of options.entries()) {
        const button = el("button", { type: "button", class: "choice" });
        // A titled option (a flight's times and price) reads as its title; the value is sent.
        // A fare that waits for a manager says so up front, before it is chosen.
        const title = field.kind === "choice" ? (field.titles[index] ?? display(option)) : display(option);
        const { label, needsApproval } = optionParts(title);
        button.textContent = label;
        if (needsApproval) {
          const mark = el("span", { class: "needs-approval" });
          mark.textContent = " · needs approval";
          button.append(mark);
        }
        button.dataset["value"] = JSON.stringify(option);
        if (!instant) button.setAttribute("aria-pressed", "false");
        button.addEventListener("click", () => {
          this.select(button);
          if (instant) submit();
        });
        group.append(button);
        this.inputs.push(button);
      }
      return;
    }
    this.element = el("div", { class: "field" });
    const label = el("label", { for: id });
    label.textContent = field.required ? field.label : `${field.label} (optional)`;
    const describedBy = [`${id}-error`];
    const input =
      field.kind === "json" ? el("textarea", { id, rows: "3" }) : el("input", { id, name: field.name });
    if (input instanceof HTMLInputElement) {
      input.type = field.kind === "number" || field.kind === "integer" ? "number" : "text";
      if (field.kind === "integer") input.step = "1";
      if (field.kind === "number") input.step = "any";
      const { minimum, maximum, maxLength } = field.schema;
      if (typeof minimum === "number") input.min = String(minimum);
      if (typeof maximum === "number") input.max = String(maximum);
      if (typeof maxLength === "number") input.maxLength = maxLength;
    }
    if (field.required) input.setAttribute("aria-required", "true");
    this.element.append(label);
    if (field.description !== undefined) {
      const hint = el("p", { id: `${id}-hint`, class: "hint" });
      hint.textContent = field.description;
      describedBy.unshift(`${id}-hint`);
      this.element.append(hint);
    }
    input.setAttribute("aria-describedby", describedBy.join(" "));
    this.element.append(input, this.error);
    this.inputs.push(input);
  }

  value(): Json | undefined {
    const [input] = this.inputs;
    if (this.field.kind === "choice" || this.field.kind === "boolean") {
      const raw = this.selected?.dataset["value"];
      if (raw === undefined) return undefined;
      try {
        return JSON.parse(raw) as Json;
      } catch {
        return raw;
      }
    }
    if (input === undefined || input instanceof HTMLButtonElement) return undefined;
    const text = input.value;
    if (text.trim() === "" && !this.field.required) return undefined;
    if (this.field.kind === "number" || this.field.kind === "integer") {
      const number = Number(text);
      return text.trim() === "" || Number.isNaN(number) ? text : number;
    }
    if (this.field.kind === "json") {
      try {
        return JSON.parse(text) as Json;
      } catch {
        return text;
      }
    }
    return text;
  }

  focusTarget(): HTMLElement {
    return this.selected ?? this.inputs[0] ?? this.element;
  }

  showError(message: string): void {
    this.error.textContent = message;
    this.error.hidden = false;
    for (const input of this.inputs) {
      if (!(input instanceof HTMLButtonElement)) input.setAttribute("aria-invalid", "true");
    }
  }

  clearError(): void {
    this.error.hidden = true;
    for (const input of this.inputs) input.removeAttribute("aria-invalid");
  }

  setDisabled(disabled: boolean): void {
    for (const input of this.inputs) input.disabled = disabled;
  }

  private select(button: HTMLButtonElement): void {
    this.selected = button;
    if (this.instant) return;
    for (const input of this.inputs) {
      input.setAttribute("aria-pressed", String(input === button));
    }
  }
}

function isSingleChoice(interrupt: Interrupt | undefined): boolean {
  if (interrupt?.responseSchema === undefined) return false;
  const { fields } = formModel(interrupt.responseSchema);
  const [only] = fields;
  return fields.length === 1 && (only?.kind === "choice" || only?.kind === "boolean");
}

function freeTextField(): Field {
  return {
    name: "answer",
    label: "Your answer",
    description: undefined,
    kind: "text",
    required: false,
    options: [],
    titles: [],
    schema: { type: "string" },
  };
}

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attributes: Record<string, string> = {},
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, value);
  return element;
}
