/**
 * The web chat: `useChat` over the UI stream routes. It loads the conversation from the snapshot, resumes a running
 * turn after a reload (`resume: true`), shows tool calls with their effect and status, asks for approvals, stops
 * a turn durably (the stop endpoint, not just closing the connection), and recovers when the server comes back.
 */
import { useChat } from "@ai-sdk/react"
import * as UiMessages from "@durable-agent/ui-stream/UiMessages"
import {
  DefaultChatTransport,
  type DynamicToolUIPart,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  type UIMessage
} from "ai"
import { type FormEvent, useCallback, useEffect, useState } from "react"

const API = "/api/chat"

/** The conversation of the session's snapshot and whether a turn runs, or none when the session does not exist yet. */
const loadConversation = async (sessionId: string): Promise<{ messages: Array<UIMessage>; active: boolean }> => {
  const response = await fetch(`${API}/${encodeURIComponent(sessionId)}/snapshot`)
  if (response.status === 404) return { messages: [], active: false }
  if (!response.ok) throw new Error(`snapshot: ${response.status}`)
  const { snapshot } = UiMessages.decodeSnapshotResponse(await response.json())
  return { messages: UiMessages.fromSnapshot(snapshot), active: (snapshot.state?.activeTurnId ?? null) !== null }
}

/** The conversation of the session's snapshot, or none when the session does not exist yet. */
const loadMessages = async (sessionId: string): Promise<Array<UIMessage>> =>
  (await loadConversation(sessionId)).messages

export const App = () => {
  const [boot, setBoot] = useState<{ sessionId: string; messages: Array<UIMessage> } | null>(null)
  const [failure, setFailure] = useState<string | null>(null)
  useEffect(() => {
    const load = async () => {
      const me = (await (await fetch("/api/me")).json()) as { sessionId: string }
      setBoot({ sessionId: me.sessionId, messages: await loadMessages(me.sessionId) })
    }
    load().catch((e: unknown) => setFailure(String(e)))
  }, [])
  if (failure !== null) return <p className="error">Could not load the chat: {failure}</p>
  if (boot === null) return <p>Loading…</p>
  return <Chat sessionId={boot.sessionId} initial={boot.messages} />
}

const Chat = ({ sessionId, initial }: { sessionId: string; initial: Array<UIMessage> }) => {
  const { messages, setMessages, sendMessage, status, error, clearError, resumeStream, addToolApprovalResponse } =
    useChat({
      id: sessionId,
      messages: initial,
      resume: true,
      transport: new DefaultChatTransport({ api: API }),
      sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses
    })
  const [input, setInput] = useState("")
  const [offline, setOffline] = useState(false)

  // The connection broke (the server went away): reload the conversation and resume once the server answers.
  useEffect(() => {
    if (status !== "error") return
    setOffline(true)
    let stopped = false
    const attempt = async () => {
      while (!stopped) {
        try {
          const loaded = await loadMessages(sessionId)
          if (stopped) return
          setMessages(loaded)
          clearError()
          setOffline(false)
          await resumeStream()
          return
        } catch {
          await new Promise((resolve) => setTimeout(resolve, 500))
        }
      }
    }
    void attempt()
    return () => {
      stopped = true
    }
  }, [status, sessionId, setMessages, clearError, resumeStream])

  const busy = status === "streaming" || status === "submitted"
  const submit = (e: FormEvent) => {
    e.preventDefault()
    if (input.trim().length === 0) return
    void sendMessage({ text: input })
    setInput("")
  }
  const [answerError, setAnswerError] = useState<string | null>(null)
  // A question's answer goes to the answer route; the page then reloads the conversation and resumes the turn
  // (the route streams the rest of the turn too, which this page does not need).
  const answerQuestion = useCallback(
    async (interruptId: string, answer: string) => {
      setAnswerError(null)
      const response = await fetch(`${API}/${encodeURIComponent(sessionId)}/answer`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ interruptId, answer })
      })
      if (!response.ok) {
        const body = (await response.json()) as { error?: { message?: string } }
        setAnswerError(body.error?.message ?? `answer: ${response.status}`)
        return
      }
      await response.body?.cancel()
      const loaded = await loadConversation(sessionId)
      setMessages(loaded.messages)
      if (!loaded.active) return
      await resumeStream()
      // the turn may have ended before the resume asked for it: the snapshot then holds the whole turn
      const after = await loadConversation(sessionId)
      if (!after.active) setMessages(after.messages)
    },
    [sessionId, setMessages, resumeStream]
  )
  const stop = useCallback(() => {
    void fetch(`${API}/${encodeURIComponent(sessionId)}/stop`, { method: "POST" })
  }, [sessionId])

  return (
    <main>
      <header>
        <h1>Durable agent chat</h1>
        <span data-testid="status" className={`status ${status}`}>
          {offline ? "reconnecting…" : status}
        </span>
      </header>
      <ol className="messages">
        {messages.map((m) => (
          <li key={m.id} className={`message ${m.role}`} data-testid={`message-${m.role}`}>
            {m.parts.map((part, i) => {
              if (part.type === "text") {
                return (
                  // biome-ignore lint/suspicious/noArrayIndexKey: text parts have no ID, and a message's parts never reorder
                  <p key={i} className="text" data-testid="text">
                    {part.text}
                  </p>
                )
              }
              if (part.type === "dynamic-tool") {
                return (
                  <ToolCall
                    key={part.toolCallId}
                    part={part}
                    running={m.parts.some((p) => p.type === "data-tool-status" && p.id === `status-${part.toolCallId}`)}
                    answer={(approved) => void addToolApprovalResponse({ id: part.approval?.id ?? "", approved })}
                  />
                )
              }
              if (part.type === "data-question") {
                const data = part.data as UiMessages.QuestionData
                return (
                  <Question
                    // the tool part of ask_user has the same ID: a prefix keeps the keys apart
                    key={`question-${part.id}`}
                    data={data}
                    answer={(answer) => void answerQuestion(data.interruptId, answer)}
                  />
                )
              }
              if (part.type === "data-plan") {
                return <Plan key="plan" data={part.data as UiMessages.PlanData} />
              }
              return null
            })}
          </li>
        ))}
      </ol>
      {error !== undefined && !offline ? <p className="error">{error.message}</p> : null}
      {answerError !== null ? <p className="error">{answerError}</p> : null}
      <form onSubmit={submit}>
        <input
          data-testid="input"
          value={input}
          placeholder="Say something; “save …” writes a note, “notes” reads them"
          onChange={(e) => setInput(e.target.value)}
        />
        <button data-testid="send" type="submit">
          Send
        </button>
        <button data-testid="stop" type="button" onClick={stop} disabled={!busy}>
          Stop
        </button>
      </form>
    </main>
  )
}

const stateLabel: Record<DynamicToolUIPart["state"], string> = {
  "input-streaming": "preparing",
  "input-available": "queued",
  "approval-requested": "waiting for your approval",
  "approval-responded": "answered",
  "output-available": "succeeded",
  "output-error": "failed",
  "output-denied": "rejected"
}

const ToolCall = ({
  part,
  running,
  answer
}: {
  part: DynamicToolUIPart
  running: boolean
  answer: (approved: boolean) => void
}) => {
  const effect = typeof part.toolMetadata?.effect === "string" ? part.toolMetadata.effect : "tool"
  const label =
    running && (part.state === "input-available" || part.state === "approval-responded")
      ? "running"
      : stateLabel[part.state]
  return (
    <div className={`tool ${part.state}`} data-testid="tool" data-tool={part.toolName} data-state={part.state}>
      <div>
        <code>
          {part.toolName}({JSON.stringify(part.input ?? {})})
        </code>{" "}
        <span className="effect">{effect}</span> <span className="state">{label}</span>
      </div>
      {part.state === "approval-requested" ? (
        <div className="approval">
          <button data-testid="approve" type="button" onClick={() => answer(true)}>
            Approve
          </button>
          <button data-testid="reject" type="button" onClick={() => answer(false)}>
            Reject
          </button>
        </div>
      ) : null}
      {part.state === "output-available" ? (
        <pre className="output">
          {String(typeof part.output === "string" ? part.output : JSON.stringify(part.output))}
        </pre>
      ) : null}
      {part.state === "output-error" ? <pre className="output">{part.errorText}</pre> : null}
    </div>
  )
}

/** A question (`ask_user`, or a tool's): its choices as buttons while it waits, then how it ended. */
const Question = ({ data, answer }: { data: UiMessages.QuestionData; answer: (answer: string) => void }) => {
  const [text, setText] = useState("")
  return (
    <div className="question" data-testid="question" data-status={data.status}>
      <p>{data.question}</p>
      {data.status === "pending" ? (
        <div className="choices">
          {data.choices.map((choice) => (
            <button key={choice} data-testid="choice" type="button" onClick={() => answer(choice)}>
              {choice}
            </button>
          ))}
          {data.allowsFreeText ? (
            <>
              <input data-testid="answer-input" value={text} onChange={(e) => setText(e.target.value)} />
              <button data-testid="answer" type="button" onClick={() => answer(text)}>
                Answer
              </button>
            </>
          ) : null}
        </div>
      ) : (
        <p className="state" data-testid="question-state">
          {data.status === "answered" ? `answered: ${data.answer ?? ""}` : data.status}
        </p>
      )}
    </div>
  )
}

/** The session's plan: its tasks with their statuses. */
const Plan = ({ data }: { data: UiMessages.PlanData }) => (
  <div className="plan" data-testid="plan" data-revision={data.revision}>
    <div>
      Plan (revision {data.revision}, {data.status})
    </div>
    <ul>
      {data.tasks.map((task, i) => (
        // biome-ignore lint/suspicious/noArrayIndexKey: a plan revision's tasks are a fixed list
        <li key={i} data-status={task.status}>
          {task.status === "completed" ? "✓" : task.status === "in_progress" ? "…" : "○"} {task.content}
        </li>
      ))}
    </ul>
  </div>
)
