// Message storage (docs/session-contract.md, "Message storage"): the conversation as a sequentially chunked
// AttributeMap. The newest messages are `AgentMessages` instances, one per message (the window), so storing a
// message is one blind instance write. When a Step leaves more than `messageWindowSize` messages in the window,
// the same commit moves the oldest into immutable `AgentMessageChunks` instances, listed in
// `AgentMessageIndex`. A message too large for a chunk of its own skips the window. Readers page through the
// chunks from the newest, so a snapshot or a page never reads the whole history; a session stored before
// chunks existed (every message in `AgentMessages`, no index) reads as one large window, and every Step that
// stores messages moves part of it into chunks.
import type { TxView } from "@durable-agent/engine"
import * as Option from "effect/Option"
import * as P from "../Persistence.ts"
import * as Wire from "../wire/index.ts"
import { sizeBound, storedBytes } from "./sizes.ts"

/** The message storage options ("Message storage", Options), named alike in every core. */
export interface MessageStorageOptions {
  /** The most messages a Step leaves in the window (`message_window_size`); default 64. */
  readonly messageWindowSize: number
  /** The most messages of one chunk (`message_chunk_size`); default 32. */
  readonly messageChunkSize: number
  /** The largest encoded chunk (`message_chunk_max_bytes`); default 1 MiB, at most 8 MiB. */
  readonly messageChunkMaxBytes: number
  /**
   * With compaction, how many of the newest messages retention always keeps (`retained_message_limit`);
   * default 1,000; `null` keeps every message.
   */
  readonly retainedMessageLimit: number | null
}

/** The default message storage options. */
export const defaultMessageStorage: MessageStorageOptions = {
  messageWindowSize: Wire.DEFAULT_MESSAGE_STORAGE_OPTIONS.messageWindowSize,
  messageChunkSize: Wire.DEFAULT_MESSAGE_STORAGE_OPTIONS.messageChunkSize,
  messageChunkMaxBytes: Wire.DEFAULT_MESSAGE_STORAGE_OPTIONS.messageChunkMaxBytes,
  retainedMessageLimit: Wire.DEFAULT_MESSAGE_STORAGE_OPTIONS.retainedMessageLimit
}

/** The problem of message storage options, or `undefined` when they are valid. */
export const messageStorageProblem = (options: MessageStorageOptions): string | undefined => {
  const positive = (name: string, value: number) =>
    Number.isInteger(value) && value >= 1 ? undefined : `${name} must be a whole number of at least 1`
  return (
    positive("messageWindowSize", options.messageWindowSize) ??
    positive("messageChunkSize", options.messageChunkSize) ??
    positive("messageChunkMaxBytes", options.messageChunkMaxBytes) ??
    (options.messageChunkMaxBytes > Wire.MAX_MESSAGE_CHUNK_MAX_BYTES
      ? `messageChunkMaxBytes must be at most ${Wire.MAX_MESSAGE_CHUNK_MAX_BYTES}`
      : undefined) ??
    (options.retainedMessageLimit === null
      ? undefined
      : Number.isInteger(options.retainedMessageLimit) && options.retainedMessageLimit >= 0
        ? undefined
        : "retainedMessageLimit must be a whole number of at least 0, or null")
  )
}

/** `{"messages":[]}`: the encoded size of an empty chunk ("Message storage", Rollover). */
const EMPTY_CHUNK_BYTES = 15

/** The encoded size of one message as a chunk entry. */
const messageBytes = (message: Wire.AgentMessage): number => storedBytes(Wire.AgentMessage, message)

const key = Wire.messageSequenceKey

// ---------------------------------------------------------------------------------------------------------
// Reads
// ---------------------------------------------------------------------------------------------------------

/** The index, or the layout of a session without one: every message in the window from sequence 1. */
export const messageIndex = (ctx: TxView): Wire.AgentMessageIndex =>
  Option.getOrElse(ctx.get(P.AgentMessageIndex), () => ({ chunks: [], firstSequence: 1, windowFirstSequence: 1 }))

/** A chunk's messages, checked against its range ("Message storage", Reads); a defect when they differ. */
const chunkMessages = (ctx: TxView, range: Wire.AgentMessageChunkRange): ReadonlyArray<Wire.AgentMessage> => {
  const chunk = ctx.getAt(P.AgentMessageChunks, key(range.firstSequence))
  const messages = Option.isSome(chunk) ? chunk.value.messages : []
  const count = range.lastSequence - range.firstSequence + 1
  if (checkedChunks.get(messages) === range.firstSequence && messages.length === count) return messages
  const holds = messages.length === count && messages.every((m, i) => m.sequence === range.firstSequence + i)
  if (holds && messages.length > 0) checkedChunks.set(messages, range.firstSequence)
  if (!holds) {
    throw new Error(
      `AgentMessageChunks[${key(range.firstSequence)}] does not hold the messages ${range.firstSequence}..${range.lastSequence} its index lists`
    )
  }
  return messages
}

/**
 * Chunks whose messages were checked against their range, with the range's first sequence: a decoded chunk is
 * an immutable value shared by every read (the engine's decode cache), so each is checked once, not per Step.
 * A range's last sequence is fixed by its messages' count, which the check covers.
 */
const checkedChunks = new WeakMap<ReadonlyArray<Wire.AgentMessage>, number>()

/** The window's messages, in sequence order (keys are zero-padded, so they sort numerically). */
const windowMessages = (ctx: TxView): Array<Wire.AgentMessage> => {
  const out: Array<Wire.AgentMessage> = []
  for (const k of ctx.keys(P.AgentMessages)) {
    const m = ctx.getAt(P.AgentMessages, k)
    if (Option.isSome(m)) out.push(m.value)
  }
  return out
}

/**
 * Every stored message, in sequence order: the chunks, then the window, merged by sequence (a single
 * oversized message's chunk sits among the window's sequences). The model input of a turn.
 */
export const allMessages = (ctx: TxView): Array<Wire.AgentMessage> => {
  const prefix = chunkPrefix(ctx, messageIndex(ctx).chunks)
  const window = windowMessages(ctx)
  if (prefix.messages.length === 0) return window
  const out = prefix.messages.concat(window)
  // Chunks are listed oldest first and the window follows them, except single oversized messages stored
  // among the window's sequences: sort only when that happened.
  if (!prefix.sorted) return out.sort((a, b) => a.sequence - b.sequence)
  for (let i = Math.max(1, prefix.messages.length); i < out.length; i++) {
    if (out[i]!.sequence < out[i - 1]!.sequence) return out.sort((a, b) => a.sequence - b.sequence)
  }
  return out
}

/** The chunks' messages in index order, with whether they are in sequence order. */
interface ChunkPrefix {
  readonly parts: ReadonlyArray<ReadonlyArray<Wire.AgentMessage>>
  readonly messages: ReadonlyArray<Wire.AgentMessage>
  readonly sorted: boolean
}

/**
 * The chunks' messages joined, by the session's first chunk: a long session's chunks are immutable decoded
 * values (the engine's decode cache), so each Step joins only the chunks added since the last join instead of
 * copying every stored message one by one. An entry is used only when its chunks are the ones read now.
 */
const joinedChunks = new WeakMap<ReadonlyArray<Wire.AgentMessage>, ChunkPrefix>()

const noChunks: ChunkPrefix = { parts: [], messages: [], sorted: true }

const chunkPrefix = (ctx: TxView, ranges: ReadonlyArray<Wire.AgentMessageChunkRange>): ChunkPrefix => {
  if (ranges.length === 0) return noChunks
  const parts = ranges.map((range) => chunkMessages(ctx, range))
  const known = joinedChunks.get(parts[0]!)
  let from = 0
  let messages: Array<Wire.AgentMessage> | ReadonlyArray<Wire.AgentMessage> = []
  let sorted = true
  if (known !== undefined && known.parts.length <= parts.length && known.parts.every((p, i) => p === parts[i])) {
    if (known.parts.length === parts.length) return known
    from = known.parts.length
    messages = known.messages
    sorted = known.sorted
  }
  const added: Array<Wire.AgentMessage> = []
  let last = messages.length === 0 ? undefined : messages[messages.length - 1]!.sequence
  for (let i = from; i < parts.length; i++) {
    for (const m of parts[i]!) {
      if (last !== undefined && m.sequence < last) sorted = false
      last = m.sequence
      added.push(m)
    }
  }
  const joined: ChunkPrefix = { parts, messages: messages.concat(added), sorted }
  joinedChunks.set(parts[0]!, joined)
  return joined
}

/**
 * Reads, before the page is merged, every chunk a page of `limit` messages before `before` needs: each range
 * (newest first) with fewer than `limit` messages of the window and of newer ranges after its last message. A
 * query reads large values lazily (the engine's `Client.queryRpc`): reading them all up front lets one run of
 * the handler name every chunk the page needs, instead of one chunk per run.
 */
const touchChunks = (
  ctx: TxView,
  window: ReadonlyArray<Wire.AgentMessage>,
  ranges: ReadonlyArray<Wire.AgentMessageChunkRange>,
  before: number,
  limit: number
): void => {
  let newer = 0
  let w = window.length - 1
  // the index lists its ranges in sequence order (disjoint ranges: by first and by last sequence alike)
  for (let c = ranges.length - 1; c >= 0; c--) {
    const range = ranges[c]!
    while (w >= 0 && window[w]!.sequence > range.lastSequence) {
      newer++
      w--
    }
    if (newer >= limit) return
    ctx.getAt(P.AgentMessageChunks, key(range.firstSequence))
    newer += Math.min(range.lastSequence, before - 1) - range.firstSequence + 1
  }
}

/**
 * The page `messagesBefore` built last from one index (by the decoded index, or by the window's first message in
 * a session without one), with what it was built from: the same `before` and `limit`, the same window messages
 * and the same chunks (decoded values, compared by identity: the engine's decode cache gives the same value for
 * the same stored text) build the same page, so a read of a session that did not change since returns the page
 * it built (the same array) instead of merging its messages again, and the client codes it once
 * (`AgentSessionClient`). A long session's snapshot merges 200 messages otherwise, on every read.
 */
interface PageMemo {
  readonly before: number
  readonly limit: number
  readonly window: ReadonlyArray<Wire.AgentMessage>
  /** The chunks the page took messages from: each range's first sequence and its decoded messages. */
  readonly chunks: ReadonlyArray<readonly [number, ReadonlyArray<Wire.AgentMessage>]>
  readonly page: ReadonlyArray<Wire.AgentMessage>
}

const pageMemos = new WeakMap<object, PageMemo>()

/** Whether `memo` was built from the state `ctx` reads now (the same window, and the same chunks). */
const memoHolds = (
  ctx: TxView,
  memo: PageMemo,
  before: number,
  limit: number,
  window: ReadonlyArray<Wire.AgentMessage>
): boolean => {
  if (memo.before !== before || memo.limit !== limit || memo.window.length !== window.length) return false
  for (let i = 0; i < window.length; i++) if (memo.window[i] !== window[i]) return false
  for (const [first, messages] of memo.chunks) {
    const chunk = ctx.getAt(P.AgentMessageChunks, key(first))
    if (!Option.isSome(chunk) || chunk.value.messages !== messages) return false
  }
  return true
}

/**
 * The newest `limit` stored messages before `beforeSequence` (all when `null`), in sequence order. Reads the
 * window and then chunks from the newest back, only as many as the page needs. The page is shared by the reads
 * of an unchanged session (`PageMemo`): callers do not change it.
 */
export const messagesBefore = (
  ctx: TxView,
  beforeSequence: number | null,
  limit: number
): ReadonlyArray<Wire.AgentMessage> => {
  const before = beforeSequence ?? Number.POSITIVE_INFINITY
  const stored = ctx.get(P.AgentMessageIndex)
  const index = Option.getOrElse(stored, () => ({ chunks: [], firstSequence: 1, windowFirstSequence: 1 }))
  // Newest first: the window's messages and the chunks' ranges, merged by sequence as the page fills.
  const window = windowMessages(ctx).filter((m) => m.sequence < before)
  const ranges = index.chunks.filter((r) => r.firstSequence < before)
  const memoKey: object | undefined = Option.isSome(stored) ? stored.value : window[0]
  const memo = memoKey === undefined ? undefined : pageMemos.get(memoKey)
  // the memo's check reads the chunks the page needs (a query reads them as it asks for them)
  if (memo !== undefined && memoHolds(ctx, memo, before, limit, window)) return memo.page
  touchChunks(ctx, window, ranges, before, limit)
  const page: Array<Wire.AgentMessage> = []
  const used: Array<readonly [number, ReadonlyArray<Wire.AgentMessage>]> = []
  let w = window.length - 1
  let c = ranges.length - 1
  let pendingChunk: ReadonlyArray<Wire.AgentMessage> = []
  let p = -1
  while (page.length < limit) {
    if (p < 0 && c >= 0 && (w < 0 || ranges[c]!.lastSequence > window[w]!.sequence)) {
      pendingChunk = chunkMessages(ctx, ranges[c]!)
      used.push([ranges[c]!.firstSequence, pendingChunk])
      p = pendingChunk.length - 1
      c--
      while (p >= 0 && pendingChunk[p]!.sequence >= before) p--
    }
    const fromChunk = p >= 0 ? pendingChunk[p]! : undefined
    const fromWindow = w >= 0 ? window[w]! : undefined
    if (fromChunk === undefined && fromWindow === undefined) break
    if (fromWindow === undefined || (fromChunk !== undefined && fromChunk.sequence > fromWindow.sequence)) {
      page.push(fromChunk!)
      p--
    } else {
      page.push(fromWindow)
      w--
    }
  }
  page.reverse()
  if (memoKey !== undefined) pageMemos.set(memoKey, { before, limit, window, chunks: used, page })
  return page
}

/**
 * The stored messages with sequences in `from..through` (`through` `null`: to the newest), in sequence order.
 * Reads only the chunks whose ranges meet the span, and the window: what a Step after a compaction loads
 * ("Compaction changes the model input").
 */
export const messagesBetween = (ctx: TxView, from: number, through: number | null): Array<Wire.AgentMessage> => {
  const last = through ?? Number.POSITIVE_INFINITY
  const index = messageIndex(ctx)
  const out: Array<Wire.AgentMessage> = []
  for (const range of index.chunks) {
    if (range.lastSequence < from || range.firstSequence > last) continue
    for (const m of chunkMessages(ctx, range)) if (m.sequence >= from && m.sequence <= last) out.push(m)
  }
  const window = windowMessages(ctx).filter((m) => m.sequence >= from && m.sequence <= last)
  if (out.length === 0) return window
  for (const m of window) out.push(m)
  for (let i = 1; i < out.length; i++) {
    if (out[i]!.sequence < out[i - 1]!.sequence) return out.sort((a, b) => a.sequence - b.sequence)
  }
  return out
}

/** The newest stored sequence, or `0` when no message is stored. */
const newestSequence = (ctx: TxView, index: Wire.AgentMessageIndex): number => {
  const keys = ctx.keys(P.AgentMessages)
  const fromWindow = keys.length === 0 ? 0 : Number(keys[keys.length - 1])
  const fromChunks = index.chunks.reduce((max, r) => Math.max(max, r.lastSequence), 0)
  return Math.max(fromWindow, fromChunks)
}

// ---------------------------------------------------------------------------------------------------------
// Writes
// ---------------------------------------------------------------------------------------------------------

/**
 * Retention ("Message storage", Retention): with a `retainedMessageLimit` and a `ContextSummary`, deletes the
 * oldest chunk while its last sequence is at or before the summary's `lastSequence` and at least
 * `retainedMessageLimit` messages are stored after it, then advances `firstSequence`. Whole chunks only: the
 * newest `retainedMessageLimit` messages and every message after the summary always stay. Writes the index only
 * when it deletes a chunk. The Steps that store messages and CompactContext call it.
 */
export const applyRetention = (ctx: TxView, options: MessageStorageOptions): void => {
  const limit = options.retainedMessageLimit
  if (limit === null) return
  const summary = ctx.get(P.ContextSummary)
  if (Option.isNone(summary)) return
  const stored = Option.getOrUndefined(ctx.get(P.AgentMessageIndex))
  if (stored === undefined) return
  let index = stored
  const newest = newestSequence(ctx, index)
  while (index.chunks.length > 0) {
    const oldest = index.chunks[0]!
    // Only the chunk that starts the stored messages: deleting another would leave a gap.
    if (oldest.firstSequence !== index.firstSequence) break
    if (oldest.lastSequence > summary.value.lastSequence) break
    if (newest - oldest.lastSequence < limit) break
    ctx.deleteAt(P.AgentMessageChunks, key(oldest.firstSequence))
    index = {
      ...index,
      chunks: index.chunks.slice(1),
      firstSequence: oldest.lastSequence + 1,
      windowFirstSequence: Math.max(index.windowFirstSequence, oldest.lastSequence + 1)
    }
  }
  if (index !== stored) ctx.set(P.AgentMessageIndex, index)
}

/**
 * The chunks each Step attempt has moved so far, so one commit moves at most four in all, with their encoded
 * sizes: an upper bound while that decides the per-commit limit, the exact sum once it was needed.
 */
const moved = new WeakMap<
  TxView,
  {
    chunks: Array<ReadonlyArray<Wire.AgentMessage>>
    bound: number
    exact: number | undefined
  }
>()

/** The exact encoded size of a chunk of `messages` (its entries between `{"messages":[` and `]}`). */
const chunkBytes = (messages: ReadonlyArray<Wire.AgentMessage>): number => {
  let n = EMPTY_CHUNK_BYTES + Math.max(0, messages.length - 1)
  for (const m of messages) n += messageBytes(m)
  return n
}

/**
 * Stores messages: each in the window with one blind write, or, when its single-message chunk would exceed
 * `messageChunkMaxBytes`, straight into a chunk of its own; then rolls the window over.
 */
export const storeMessages = (
  ctx: TxView,
  options: MessageStorageOptions,
  messages: ReadonlyArray<Wire.AgentMessage>
): void => {
  if (messages.length === 0) return
  let index = Option.getOrUndefined(ctx.get(P.AgentMessageIndex))
  for (const m of messages) {
    // a message far below the bound (every message but the largest) is not encoded to be measured
    const bound = options.messageChunkMaxBytes - EMPTY_CHUNK_BYTES
    if (sizeBound(m) > bound && messageBytes(m) > bound) {
      ctx.setAt(P.AgentMessageChunks, key(m.sequence), { messages: [m] })
      const base = index ?? { chunks: [], firstSequence: 1, windowFirstSequence: 1 }
      index = { ...base, chunks: [...base.chunks, { firstSequence: m.sequence, lastSequence: m.sequence }] }
    } else {
      ctx.setAt(P.AgentMessages, key(m.sequence), m)
    }
  }
  if (index !== undefined) ctx.set(P.AgentMessageIndex, index)
  rollOver(ctx, options)
  applyRetention(ctx, options)
}

/**
 * Moves the oldest window messages into chunks while the window holds more than `messageWindowSize`: a chunk
 * closes at `messageChunkSize` messages, before the next message would take its encoded size past
 * `messageChunkMaxBytes`, or before a gap (a single oversized message's chunk). One commit moves at most
 * MESSAGE_ROLLOVER_MAX_CHUNKS_PER_COMMIT chunks and MESSAGE_ROLLOVER_MAX_BYTES_PER_COMMIT bytes unless its
 * first chunk alone is larger. Writes the index only when it moves a chunk.
 */
export const rollOver = (ctx: TxView, options: MessageStorageOptions): void => {
  const keys = ctx.keys(P.AgentMessages)
  if (keys.length <= options.messageWindowSize) return
  const done = moved.get(ctx) ?? { chunks: [], bound: 0, exact: 0 }
  moved.set(ctx, done)
  let index = messageIndex(ctx)
  let excess = keys.length - options.messageWindowSize
  let next = 0
  while (excess > 0 && done.chunks.length < Wire.MESSAGE_ROLLOVER_MAX_CHUNKS_PER_COMMIT) {
    const chunk: Array<Wire.AgentMessage> = []
    // The chunk's encoded size: an upper bound (no encoding) while it is below the chunk limit, which then holds
    // for the exact size too; the exact size once the bound would pass the limit. The decisions are the exact
    // sizes' decisions either way, without encoding every moved message to measure it.
    let bound = EMPTY_CHUNK_BYTES
    let exact: number | undefined
    while (next < keys.length && chunk.length < options.messageChunkSize) {
      const m = Option.getOrUndefined(ctx.getAt(P.AgentMessages, keys[next]!))
      if (m === undefined) break
      const separator = chunk.length === 0 ? 0 : 1
      if (chunk.length > 0 && m.sequence !== chunk.at(-1)!.sequence + 1) break
      const mBound = sizeBound(m) + separator
      if (exact === undefined && bound + mBound > options.messageChunkMaxBytes) {
        exact = chunkBytes(chunk)
      }
      if (exact !== undefined) {
        const size = messageBytes(m) + separator
        if (chunk.length > 0 && exact + size > options.messageChunkMaxBytes) break
        exact += size
      }
      chunk.push(m)
      bound += mBound
      next++
    }
    if (chunk.length === 0) break
    if (done.chunks.length > 0 && done.bound + bound > Wire.MESSAGE_ROLLOVER_MAX_BYTES_PER_COMMIT) {
      done.exact ??= done.chunks.reduce((n, c) => n + chunkBytes(c), 0)
      exact ??= chunkBytes(chunk)
      if (done.exact + exact > Wire.MESSAGE_ROLLOVER_MAX_BYTES_PER_COMMIT) break
    }
    const first = chunk[0]!.sequence
    const last = chunk.at(-1)!.sequence
    ctx.setAt(P.AgentMessageChunks, key(first), { messages: chunk })
    for (const m of chunk) ctx.deleteAt(P.AgentMessages, key(m.sequence))
    index = {
      ...index,
      chunks: [...index.chunks, { firstSequence: first, lastSequence: last }].sort(
        (a, b) => a.firstSequence - b.firstSequence
      ),
      windowFirstSequence: Math.max(index.windowFirstSequence, last + 1)
    }
    done.chunks.push(chunk)
    done.bound += bound
    done.exact = done.exact === undefined || exact === undefined ? undefined : done.exact + exact
    excess -= chunk.length
  }
  if (done.chunks.length > 0) ctx.set(P.AgentMessageIndex, index)
}

/**
 * The first sequence after a turn's user messages, found by scanning back from the newest message: for a
 * turn whose TurnReplySequence is missing or names another turn (one an earlier worker started).
 */
export const scanReplySequence = (ctx: TxView, turnId: string, nextMessageSequence: number): number => {
  let reply = nextMessageSequence
  let before: number | null = null
  for (;;) {
    const page = messagesBefore(ctx, before, 64)
    for (let i = page.length - 1; i >= 0; i--) {
      const m = page[i]!
      if (m.turnId !== turnId) return reply
      if (m.role !== "user") reply = m.sequence
    }
    if (page.length < 64) return reply
    before = page[0]!.sequence
  }
}
