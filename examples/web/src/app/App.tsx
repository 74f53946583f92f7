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

/** The conversation of the session's snapshot, or none when the session does not exist yet. */
const loadMessages = async (sessionId: string): Promise<Array<UIMessage>> => {
  const response = await fetch(`${API}/${encodeURIComponent(sessionId)}/snapshot`)
  if (response.status === 404) return []
  if (!response.ok) throw new Error(`snapshot: ${response.status}`)
  return UiMessages.fromSnapshot(UiMessages.decodeSnapshotResponse(await response.json()).snapshot)
}

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
              return null
            })}
          </li>
        ))}
      </ol>
      {error !== undefined && !offline ? <p className="error">{error.message}</p> : null}
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
