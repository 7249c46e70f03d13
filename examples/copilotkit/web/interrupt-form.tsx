/**
 * An AG-UI interrupt rendered from its `responseSchema`: an enum is a row of buttons, a boolean
 * is approve/deny, strings and numbers are fields with a submit button. A question with a single
 * enum or boolean answer resolves on one click; anything larger is a form.
 */

import { useState } from "react";
import type { FormEvent, ReactElement } from "react";
import type { Interrupt, InterruptCancelFn, InterruptResolveFn } from "@copilotkit/react-core/v2";

import { choicesOf, fieldsOf, isOneClick, parsed } from "./schema-fields";

type Answer = Record<string, unknown>;

export interface InterruptFormProps {
  interrupt: Interrupt;
  resolve: InterruptResolveFn;
  cancel: InterruptCancelFn;
}

export function InterruptForm({ interrupt, resolve, cancel }: InterruptFormProps): ReactElement {
  const fields = fieldsOf(interrupt.responseSchema);
  const [answer, setAnswer] = useState<Answer>({});
  const [sending, setSending] = useState(false);
  const oneClick = isOneClick(fields);
  const question = interrupt.message ?? "The assistant needs your answer.";

  const send = (payload: Answer): void => {
    setSending(true);
    // A refusal arrives as a RUN_ERROR (shown by the page); the question stays, so allow a retry.
    void resolve(payload, interrupt.id)
      .catch(() => undefined)
      .finally(() => setSending(false));
  };
  const submit = (event: FormEvent): void => {
    event.preventDefault();
    send(answer);
  };

  return (
    <section className="question" aria-label="Question" data-interrupt-id={interrupt.id}>
      <h2>{question}</h2>
      <form onSubmit={submit}>
        {fields.map((field) => {
          const choices = choicesOf(field);
          if (choices !== null) {
            return (
              <fieldset key={field.name} className="choices">
                <legend>{field.title}</legend>
                {choices.map((choice) => (
                  <button
                    key={choice.label}
                    type="button"
                    disabled={sending}
                    aria-pressed={!oneClick && answer[field.name] === choice.value}
                    onClick={() => {
                      if (oneClick) send({ [field.name]: choice.value });
                      else setAnswer({ ...answer, [field.name]: choice.value });
                    }}
                  >
                    {choice.label}
                  </button>
                ))}
              </fieldset>
            );
          }
          return (
            <label key={field.name}>
              {field.title}
              <input
                name={field.name}
                required={field.required}
                type={field.schema.type === "number" || field.schema.type === "integer" ? "number" : "text"}
                onChange={(event) =>
                  setAnswer({ ...answer, [field.name]: parsed(field, event.target.value) })
                }
              />
            </label>
          );
        })}
        <div className="actions">
          {oneClick ? null : (
            <button type="submit" disabled={sending}>
              Submit
            </button>
          )}
          <button type="button" disabled={sending} onClick={() => void cancel(interrupt.id)}>
            Cancel
          </button>
        </div>
      </form>
    </section>
  );
}
