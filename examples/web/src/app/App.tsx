/**
 * The web chat: a conversation list (new, switch, rename, delete) and `useChat` over the UI stream routes for
 * the open conversation. It loads a conversation from the snapshot (with the snapshot's `history`, so tools keep
 * their effect class and a stopped answer its text), resumes a running turn after a reload (`resume: true`),
 * renders answers as markdown, shows tool calls as cards with their effect class, status and output, asks for
 * approvals and answers in cards, stops a turn durably (the stop endpoint, not just closing the connection), and
 * recovers when the server comes back.
 */
import { useChat } from "@ai-sdk/react"
import * as UiMessages from "@durable-agent/ui-stream/UiMessages"
import { DefaultChatTransport, type DynamicToolUIPart, lastAssistantMessageIsCompleteWithApprovalResponses } from "ai"
import { type FormEvent, type KeyboardEvent, useCallback, useEffect, useLayoutEffect, useRef, useState } from "react"
import Markdown from "react-markdown"
import remarkGfm from "remark-gfm"

const API = "/api/chat"

type Message = UiMessages.TurnUIMessage

interface Conversation {
  readonly id: string
  readonly title: string
  readonly createdAt: string
}

/** The conversation of a session's snapshot and whether a turn runs; none when the session does not exist yet. */
const loadConversation = async (sessionId: string): Promise<{ messages: Array<Message>; active: boolean }> => {
  const response = await fetch(`${API}/${encodeURIComponent(sessionId)}/snapshot`)
  if (response.status === 404) return { messages: [], active: false }
  if (!response.ok) throw new Error(`snapshot: ${response.status}`)
  const { snapshot, history } = UiMessages.decodeSnapshotResponse(await response.json())
  return {
    messages: UiMessages.fromSnapshot(snapshot, history),
    active: (snapshot.state?.activeTurnId ?? null) !== null
  }
}

const loadMessages = async (sessionId: string): Promise<Array<Message>> => (await loadConversation(sessionId)).messages

const api = async <A,>(path: string, init?: RequestInit): Promise<A> => {
  const response = await fetch(path, {
    ...init,
    headers: { "content-type": "application/json", ...init?.headers }
  })
  if (!response.ok) throw new Error(`${init?.method ?? "GET"} ${path}: ${response.status}`)
  return (await response.json()) as A
}

const conversationFromHash = () => decodeURIComponent(window.location.hash.slice(1))

export const App = () => {
  const [conversations, setConversations] = useState<Array<Conversation> | null>(null)
  const [current, setCurrent] = useState<{ id: string; messages: Array<Message> } | null>(null)
  const [failure, setFailure] = useState<string | null>(null)
  const [menuOpen, setMenuOpen] = useState(false)

  const open = useCallback(async (id: string) => {
    setCurrent(null)
    window.location.hash = encodeURIComponent(id)
    setCurrent({ id, messages: await loadMessages(id) })
    setMenuOpen(false)
  }, [])

  const refresh = useCallback(async () => {
    const { conversations } = await api<{ conversations: Array<Conversation> }>("/api/conversations")
    setConversations(conversations)
    return conversations
  }, [])

  const create = useCallback(async () => {
    const { conversation } = await api<{ conversation: Conversation }>("/api/conversations", {
      method: "POST",
      body: JSON.stringify({})
    })
    await refresh()
    await open(conversation.id)
  }, [refresh, open])

  // once per page (React may run an effect twice): a second run must not create a second conversation
  const started = useRef(false)
  useEffect(() => {
    if (started.current) return
    started.current = true
    const load = async () => {
      await api("/api/me")
      const list = await refresh()
      const wanted = conversationFromHash()
      const first = list.find((c) => c.id === wanted) ?? list[0]
      if (first === undefined) await create()
      else await open(first.id)
    }
    load().catch((e: unknown) => setFailure(String(e)))
  }, [refresh, open, create])

  const rename = useCallback(
    async (id: string, title: string) => {
      await api(`/api/conversations/${encodeURIComponent(id)}`, { method: "PATCH", body: JSON.stringify({ title }) })
      await refresh()
    },
    [refresh]
  )
  const remove = useCallback(
    async (id: string) => {
      await api(`/api/conversations/${encodeURIComponent(id)}`, { method: "DELETE" })
      const list = await refresh()
      if (current?.id === id) {
        const next = list[0]
        if (next === undefined) await create()
        else await open(next.id)
      }
    },
    [refresh, current, create, open]
  )

  if (failure !== null) return <p className="error">Could not load the chat: {failure}</p>
  if (conversations === null) return <p className="loading">Loading…</p>
  const title = conversations.find((c) => c.id === current?.id)?.title ?? "Chat"
  return (
    <div className={`layout ${menuOpen ? "menu-open" : ""}`}>
      <aside className="sidebar" data-testid="sidebar">
        <div className="sidebar-head">
          <button className="new" data-testid="new-chat" type="button" onClick={() => void create()}>
            + New chat
          </button>
          <button
            className="icon close-menu"
            data-testid="close-menu"
            type="button"
            title="Close"
            onClick={() => setMenuOpen(false)}
          >
            ✕
          </button>
        </div>
        <ul className="conversations">
          {conversations.map((c) => (
            <ConversationItem
              key={c.id}
              conversation={c}
              active={c.id === current?.id}
              onOpen={() => void open(c.id)}
              onRename={(t) => void rename(c.id, t)}
              onDelete={() => void remove(c.id)}
            />
          ))}
        </ul>
      </aside>
      <div className="main">
        {current === null ? (
          <p className="loading">Loading…</p>
        ) : (
          <Chat
            key={current.id}
            sessionId={current.id}
            title={title}
            initial={current.messages}
            onMenu={() => setMenuOpen((o) => !o)}
            onFirstMessage={(text) => {
              if (title === "New chat") void rename(current.id, text)
            }}
          />
        )}
      </div>
    </div>
  )
}

const ConversationItem = ({
  conversation,
  active,
  onOpen,
  onRename,
  onDelete
}: {
  conversation: Conversation
  active: boolean
  onOpen: () => void
  onRename: (title: string) => void
  onDelete: () => void
}) => {
  const [editing, setEditing] = useState(false)
  const [draft, setDraft] = useState(conversation.title)
  const save = () => {
    setEditing(false)
    if (draft.trim().length > 0 && draft !== conversation.title) onRename(draft)
  }
  const keys = (e: KeyboardEvent) => {
    if (e.key === "Enter") save()
    if (e.key === "Escape") setEditing(false)
  }
  return (
    <li className={`conversation ${active ? "active" : ""}`} data-testid="conversation" data-id={conversation.id}>
      {editing ? (
        <input
          className="rename-input"
          data-testid="rename-input"
          value={draft}
          // biome-ignore lint/a11y/noAutofocus: the field appears because the user asked to rename
          autoFocus
          onChange={(e) => setDraft(e.target.value)}
          onKeyDown={keys}
          onBlur={save}
        />
      ) : (
        <button className="title" data-testid="conversation-title" type="button" onClick={onOpen}>
          {conversation.title}
        </button>
      )}
      <button
        className="icon"
        data-testid="rename"
        type="button"
        title="Rename"
        onClick={() => {
          setDraft(conversation.title)
          setEditing(true)
        }}
      >
        ✎
      </button>
      <button className="icon" data-testid="delete" type="button" title="Delete" onClick={onDelete}>
        ✕
      </button>
    </li>
  )
}

/** How the open turn stands, for the status line and the buttons. */
const waitingFor = (messages: ReadonlyArray<Message>): "approval" | "answer" | null => {
  const last = messages.at(-1)
  if (last?.role !== "assistant") return null
  const status = last.metadata?.turnStatus
  return status === "awaiting_approval" ? "approval" : status === "awaiting_answer" ? "answer" : null
}

const Chat = ({
  sessionId,
  title,
  initial,
  onMenu,
  onFirstMessage
}: {
  sessionId: string
  title: string
  initial: Array<Message>
  onMenu: () => void
  onFirstMessage: (text: string) => void
}) => {
  const [running, setRunning] = useState<ReadonlySet<string>>(new Set())
  const { messages, setMessages, sendMessage, status, error, clearError, resumeStream, addToolApprovalResponse } =
    useChat<Message>({
      id: sessionId,
      messages: initial,
      resume: true,
      transport: new DefaultChatTransport({ api: API }),
      dataPartSchemas: UiMessages.dataPartSchemas,
      messageMetadataSchema: UiMessages.messageMetadataSchema,
      sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
      // the tool status is transient: it reaches onData, never the message
      onData: (part) => {
        if (part.type === "data-tool-status") setRunning((r) => new Set(r).add(part.data.toolCallId))
      }
    })
  const [input, setInput] = useState("")
  const [offline, setOffline] = useState(false)
  const [notice, setNotice] = useState<string | null>(null)

  // The connection broke (the server went away): reload the conversation and resume once the server answers.
  // A refused message (another tab left an approval or a question waiting), or an approval another tab answered
  // or stopped first, reloads the conversation and resumes the active turn, so this page shows where it stands.
  useEffect(() => {
    if (status !== "error") return
    const refused = ["awaiting_input", "interrupt_not_pending", "no_active_turn"].find(
      (code) => error?.message.includes(code) === true
    )
    if (refused !== undefined) {
      setNotice(
        refused === "awaiting_input"
          ? "The turn waits for your approval or answer first."
          : "That approval was already answered, or the turn stopped (in another tab?)."
      )
      void loadConversation(sessionId).then(async (loaded) => {
        setMessages(loaded.messages)
        clearError()
        if (!loaded.active) return
        await resumeStream()
        // the turn may have ended before the resume asked for it: the snapshot then holds the whole turn
        const after = await loadConversation(sessionId)
        if (!after.active) setMessages(after.messages)
      })
      return
    }
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
  }, [status, error, sessionId, setMessages, clearError, resumeStream])

  const waiting = status === "ready" ? waitingFor(messages) : null
  const busy = status === "streaming" || status === "submitted"
  const label = offline
    ? "reconnecting…"
    : waiting === "approval"
      ? "waiting for your approval"
      : waiting === "answer"
        ? "waiting for your answer"
        : status
  const submit = (e: FormEvent) => {
    e.preventDefault()
    const text = input.trim()
    if (text.length === 0 || busy || waiting !== null) return
    setNotice(null)
    if (!messages.some((m) => m.role === "user")) onFirstMessage(text)
    void sendMessage({ text })
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
  const stop = useCallback(async () => {
    await fetch(`${API}/${encodeURIComponent(sessionId)}/stop`, { method: "POST" })
    if (busy) return // the open stream finishes with the stop
    // a turn that waited for the user has no open stream: resume it, so its end ("Stopped") shows; the snapshot
    // leaves out a turn that still runs, so a reload read before the cancel committed would drop the answer
    const loaded = await loadConversation(sessionId)
    setMessages(loaded.messages)
    if (loaded.active) await resumeStream()
    const after = await loadConversation(sessionId)
    if (!after.active) setMessages(after.messages)
  }, [sessionId, busy, setMessages, resumeStream])

  // Auto-scroll: follow the newest message while the user is at the bottom; leave them where they scrolled to.
  const scroller = useRef<HTMLDivElement>(null)
  const pinned = useRef(true)
  useLayoutEffect(() => {
    const element = scroller.current
    if (element !== null && pinned.current) element.scrollTop = element.scrollHeight
  })
  // a smaller window (a phone turned, a keyboard opening) keeps the newest message in view too
  useEffect(() => {
    const follow = () => {
      const element = scroller.current
      if (element !== null && pinned.current) element.scrollTop = element.scrollHeight
    }
    window.addEventListener("resize", follow)
    return () => window.removeEventListener("resize", follow)
  }, [])
  const onScroll = () => {
    const element = scroller.current
    if (element !== null) pinned.current = element.scrollHeight - element.scrollTop - element.clientHeight < 48
  }

  return (
    <section className="chat">
      <header className="chat-header">
        <button className="icon menu" data-testid="menu" type="button" title="Conversations" onClick={onMenu}>
          ☰
        </button>
        <h1 data-testid="chat-title">{title}</h1>
        <span data-testid="status" className={`status ${offline ? "offline" : waiting !== null ? "waiting" : status}`}>
          {label}
        </span>
      </header>
      <div className="scroller" ref={scroller} onScroll={onScroll} data-testid="scroller">
        <ol className="messages">
          {messages.length === 0 ? (
            <li className="empty">
              Say something. “save …” writes a note (it asks for your approval), “ask me” asks a question, “make a plan”
              writes a plan, “show code” answers with a code block.
            </li>
          ) : null}
          {messages.map((m) => (
            <MessageView
              key={m.id}
              message={m}
              running={running}
              approve={(id, approved) => void addToolApprovalResponse({ id, approved })}
              answer={(interruptId, answer) => void answerQuestion(interruptId, answer)}
            />
          ))}
        </ol>
      </div>
      <footer className="composer">
        {error !== undefined && !offline && notice === null ? <p className="error">{error.message}</p> : null}
        {answerError !== null ? <p className="error">{answerError}</p> : null}
        {notice !== null ? (
          <p className="notice" data-testid="notice">
            {notice}
          </p>
        ) : null}
        <form onSubmit={submit}>
          <input
            data-testid="input"
            value={input}
            disabled={waiting !== null}
            placeholder={
              waiting === "approval"
                ? "Approve or reject the tool call above first"
                : waiting === "answer"
                  ? "Answer the question above first"
                  : "Message the agent"
            }
            onChange={(e) => setInput(e.target.value)}
          />
          <button data-testid="send" type="submit" disabled={busy || waiting !== null}>
            Send
          </button>
          <button
            data-testid="stop"
            className="stop"
            type="button"
            onClick={() => void stop()}
            disabled={!busy && waiting === null}
          >
            Stop
          </button>
        </form>
      </footer>
    </section>
  )
}

const MessageView = ({
  message,
  running,
  approve,
  answer
}: {
  message: Message
  running: ReadonlySet<string>
  approve: (approvalId: string, approved: boolean) => void
  answer: (interruptId: string, answer: string) => void
}) => {
  const questions = new Set(message.parts.flatMap((p) => (p.type === "data-question" ? [p.data.toolCallId] : [])))
  const status = message.metadata?.turnStatus
  return (
    <li className={`message ${message.role}`} data-testid={`message-${message.role}`}>
      {message.parts.map((part, i) => {
        if (part.type === "text") {
          return message.role === "user" ? (
            // biome-ignore lint/suspicious/noArrayIndexKey: text parts have no ID, and a message's parts never reorder
            <p key={i} className="text" data-testid="text">
              {part.text}
            </p>
          ) : (
            // biome-ignore lint/suspicious/noArrayIndexKey: as above
            <div key={i} className="text markdown" data-testid="text">
              <Markdown remarkPlugins={[remarkGfm]}>{part.text}</Markdown>
            </div>
          )
        }
        if (part.type === "reasoning") {
          return (
            // biome-ignore lint/suspicious/noArrayIndexKey: as above
            <details key={i} className="reasoning">
              <summary>Reasoning</summary>
              {part.text}
            </details>
          )
        }
        if (part.type === "dynamic-tool") {
          // an ask_user call shows as its question card only
          if (questions.has(part.toolCallId)) return null
          return (
            <ToolCard
              key={part.toolCallId}
              part={part}
              running={running.has(part.toolCallId)}
              answer={(approved) => approve(part.approval?.id ?? "", approved)}
            />
          )
        }
        if (part.type === "data-question") {
          return (
            <QuestionCard
              // the tool part of ask_user has the same ID: a prefix keeps the keys apart
              key={`question-${part.id}`}
              data={part.data}
              answer={(text) => answer(part.data.interruptId, text)}
            />
          )
        }
        if (part.type === "data-plan") return <PlanCard key="plan" data={part.data} />
        return null
      })}
      {status === "cancelled" ? (
        <div className="marker stopped" data-testid="stopped">
          ■ Stopped
        </div>
      ) : status === "failed" ? (
        <div className="marker failed" data-testid="failed">
          The turn failed
        </div>
      ) : null}
    </li>
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

const showJson = (value: unknown) => (typeof value === "string" ? value : JSON.stringify(value, null, 2))

/** A tool call: its name and input, its effect class, how it stands, and its output. */
const ToolCard = ({
  part,
  running,
  answer
}: {
  part: DynamicToolUIPart
  running: boolean
  answer: (approved: boolean) => void
}) => {
  const effect = typeof part.toolMetadata?.effect === "string" ? part.toolMetadata.effect : "unknown"
  const settled = part.state === "output-available" || part.state === "output-error" || part.state === "output-denied"
  const label =
    running && (part.state === "input-available" || part.state === "approval-responded")
      ? "running"
      : stateLabel[part.state]
  const input = part.input === undefined || JSON.stringify(part.input) === "{}" ? null : showJson(part.input)
  return (
    <div
      className={`card tool ${part.state} ${settled ? "" : running ? "running" : ""}`}
      data-testid="tool"
      data-tool={part.toolName}
      data-state={part.state}
    >
      <div className="card-head">
        <code className="tool-name">{part.toolName}</code>
        <span className={`effect effect-${effect}`} data-testid="effect">
          {effect}
        </span>
        <span className="state" data-testid="tool-state">
          {label}
        </span>
      </div>
      {input !== null ? <pre className="tool-input">{input}</pre> : null}
      {part.state === "approval-requested" ? (
        <div className="approval" data-testid="approval">
          <p>
            <strong>{part.toolName}</strong> is a <em>{effect.replaceAll("_", " ")}</em>: it runs only if you approve.
          </p>
          <div className="buttons">
            <button className="approve" data-testid="approve" type="button" onClick={() => answer(true)}>
              Approve
            </button>
            <button className="reject" data-testid="reject" type="button" onClick={() => answer(false)}>
              Reject
            </button>
          </div>
        </div>
      ) : null}
      {part.state === "output-available" ? <pre className="output">{showJson(part.output)}</pre> : null}
      {part.state === "output-error" ? <pre className="output error">{part.errorText}</pre> : null}
    </div>
  )
}

/** A question (`ask_user`, or a tool's): its choices as buttons while it waits, then how it ended. */
const QuestionCard = ({ data, answer }: { data: UiMessages.QuestionData; answer: (answer: string) => void }) => {
  const [text, setText] = useState("")
  return (
    <div className={`card question ${data.status}`} data-testid="question" data-status={data.status}>
      <div className="card-head">
        <span className="badge">Question</span>
        <span className="state">{data.status}</span>
      </div>
      <p className="question-text">{data.question}</p>
      {data.status === "pending" ? (
        <div className="choices">
          {data.choices.map((choice) => (
            <button key={choice} data-testid="choice" type="button" onClick={() => answer(choice)}>
              {choice}
            </button>
          ))}
          {data.allowsFreeText ? (
            <form
              className="free-text"
              onSubmit={(e) => {
                e.preventDefault()
                if (text.trim().length > 0) answer(text)
              }}
            >
              <input data-testid="answer-input" value={text} onChange={(e) => setText(e.target.value)} />
              <button data-testid="answer" type="submit">
                Answer
              </button>
            </form>
          ) : null}
        </div>
      ) : (
        <p className="answer" data-testid="question-state">
          {data.status === "answered" ? `answered: ${data.answer ?? ""}` : data.status}
        </p>
      )}
    </div>
  )
}

/** The session's plan: its tasks with their statuses. */
const PlanCard = ({ data }: { data: UiMessages.PlanData }) => (
  <div className="card plan" data-testid="plan" data-revision={data.revision}>
    <div className="card-head">
      <span className="badge">Plan</span>
      <span className="state">
        revision {data.revision}, {data.status}
      </span>
    </div>
    <ul>
      {data.tasks.map((task, i) => (
        // biome-ignore lint/suspicious/noArrayIndexKey: a plan revision's tasks are a fixed list
        <li key={i} data-status={task.status}>
          <span className="check">{task.status === "completed" ? "✓" : task.status === "in_progress" ? "…" : "○"}</span>{" "}
          {task.content}
        </li>
      ))}
    </ul>
  </div>
)
