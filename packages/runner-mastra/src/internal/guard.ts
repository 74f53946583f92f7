// The Step-rule guard: a per-run wrapper around the model that Mastra calls. It refuses a second model
// call in one run, refuses a prompt from which Mastra dropped a tool call or its result, and records the
// raw argument text of every tool call (Mastra replaces arguments that are not JSON with `{}`).

/** A language model as Mastra takes it (AI SDK specification v2, v3 or v4). */
export interface GuardedModel {
  readonly specificationVersion: string
  readonly provider: string
  readonly modelId: string
  doStream(options: unknown): PromiseLike<unknown>
  doGenerate(options: unknown): PromiseLike<unknown>
}

/** Thrown inside the framework when a model call would break a Step rule; the runner reports `reason`. */
export class StepRuleViolation extends Error {
  override readonly name = "StepRuleViolation"
}

/** What one run's guard saw. */
export interface Guard {
  /** The wrapped model to hand to Mastra for this run only. */
  readonly model: GuardedModel
  /** Calls that reached the provider. */
  readonly calls: () => number
  /** The first broken rule, if any. */
  readonly violation: () => string | undefined
  /** The model's own argument text of a tool call, by ID. */
  readonly rawArguments: ReadonlyMap<string, string>
}

interface PromptPart {
  readonly type: string
  readonly toolCallId?: string
}

/** The tool call IDs of a prompt that lack a `tool-call` part or a `tool-result` part. */
const missingFromPrompt = (prompt: unknown, expected: ReadonlyArray<string>): Array<string> => {
  const calls = new Set<string>()
  const results = new Set<string>()
  for (const message of Array.isArray(prompt) ? prompt : []) {
    const content = (message as { content?: unknown }).content
    if (!Array.isArray(content)) continue
    for (const part of content as Array<PromptPart>) {
      if (part.type === "tool-call" && part.toolCallId !== undefined) calls.add(part.toolCallId)
      if (part.type === "tool-result" && part.toolCallId !== undefined) results.add(part.toolCallId)
    }
  }
  return expected.filter((id) => !calls.has(id) || !results.has(id))
}

/** A part of a model's response (stream part or content part); tool calls carry their input text. */
interface ModelPart {
  readonly type: string
  readonly toolCallId?: string
  readonly input?: unknown
}

const rawInput = (part: ModelPart) => (typeof part.input === "string" ? part.input : JSON.stringify(part.input ?? {}))

/**
 * Wraps `model` for one run. `expectedToolCalls` are the tool calls the run's input holds with a result:
 * each must reach the model as a call and its result.
 */
export const make = (model: GuardedModel, expectedToolCalls: ReadonlyArray<string>): Guard => {
  let calls = 0
  let violation: string | undefined
  const rawArguments = new Map<string, string>()
  const refuse = (reason: string): never => {
    violation ??= reason
    throw new StepRuleViolation(reason)
  }
  const admit = (options: unknown) => {
    if (calls >= 1) {
      refuse(`Mastra asked for a second model call in one RunModel Step (call ${calls + 1}); it was not made`)
    }
    const missing = missingFromPrompt((options as { prompt?: unknown }).prompt, expectedToolCalls)
    if (missing.length > 0) {
      refuse(`Mastra left tool call ${missing.join(", ")} or its result out of the prompt; the model call was not made`)
    }
    calls++
  }
  const doStream = async (options: unknown) => {
    admit(options)
    const result = (await model.doStream(options)) as { stream: ReadableStream<ModelPart> }
    const capture = new TransformStream<ModelPart, ModelPart>({
      transform(part, controller) {
        if (part.type === "tool-call" && part.toolCallId !== undefined)
          rawArguments.set(part.toolCallId, rawInput(part))
        controller.enqueue(part)
      }
    })
    return { ...result, stream: result.stream.pipeThrough(capture) }
  }
  const doGenerate = async (options: unknown) => {
    admit(options)
    const result = (await model.doGenerate(options)) as { content?: Array<ModelPart> }
    for (const part of result.content ?? []) {
      if (part.type === "tool-call" && part.toolCallId !== undefined) rawArguments.set(part.toolCallId, rawInput(part))
    }
    return result
  }
  const wrapped = new Proxy(model, {
    get(target, property) {
      if (property === "doStream") return doStream
      if (property === "doGenerate") return doGenerate
      const value = Reflect.get(target, property, target)
      return typeof value === "function" ? value.bind(target) : value
    }
  })
  return { model: wrapped, calls: () => calls, violation: () => violation, rawArguments }
}
