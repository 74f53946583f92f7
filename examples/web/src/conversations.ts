/**
 * The web chat's conversation list: each user's conversations (a session each, ID `<user>-<conversation>`) with a
 * title, kept in a JSON file beside the database. The sessions themselves live in the engine; this file only
 * names them, so the list survives a restart like the sessions do.
 */
import { randomUUID } from "node:crypto"
import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs"

/** One conversation of the list. */
export interface Conversation {
  readonly id: string
  readonly title: string
  readonly createdAt: string
}

/** The longest title kept. */
export const MAX_TITLE_CHARS = 80

const isConversation = (value: unknown): value is Conversation =>
  typeof value === "object" &&
  value !== null &&
  typeof (value as Conversation).id === "string" &&
  typeof (value as Conversation).title === "string" &&
  typeof (value as Conversation).createdAt === "string"

/** A conversation list stored in `file` (JSON `{ [user]: Conversation[] }`, written atomically). */
export const conversationStore = (file: string) => {
  const read = (): Record<string, Array<Conversation>> => {
    if (!existsSync(file)) return {}
    try {
      const parsed = JSON.parse(readFileSync(file, "utf8")) as unknown
      if (typeof parsed !== "object" || parsed === null) return {}
      const out: Record<string, Array<Conversation>> = {}
      for (const [user, list] of Object.entries(parsed)) {
        if (Array.isArray(list)) out[user] = list.filter(isConversation)
      }
      return out
    } catch {
      return {}
    }
  }
  const write = (all: Record<string, Array<Conversation>>) => {
    writeFileSync(`${file}.tmp`, JSON.stringify(all))
    renameSync(`${file}.tmp`, file)
  }
  const cleanTitle = (title: string) => title.replace(/\s+/g, " ").trim().slice(0, MAX_TITLE_CHARS) || "New chat"
  return {
    /** The user's conversations, newest first. */
    list: (user: string): Array<Conversation> => [...(read()[user] ?? [])].reverse(),
    /** Whether the conversation (a session ID) is the user's. */
    owns: (user: string, id: string): boolean => (read()[user] ?? []).some((c) => c.id === id),
    /** Adds a conversation; its session starts with its first message. */
    create: (user: string, title = "New chat"): Conversation => {
      const all = read()
      const conversation = {
        id: `${user}-${randomUUID().slice(0, 8)}`,
        title: cleanTitle(title),
        createdAt: new Date().toISOString()
      }
      all[user] = [...(all[user] ?? []), conversation]
      write(all)
      return conversation
    },
    /** Renames a conversation of the user; undefined when it is not theirs. */
    rename: (user: string, id: string, title: string): Conversation | undefined => {
      const all = read()
      const list = all[user] ?? []
      const index = list.findIndex((c) => c.id === id)
      if (index < 0) return undefined
      const renamed = { ...list[index]!, title: cleanTitle(title) }
      all[user] = [...list.slice(0, index), renamed, ...list.slice(index + 1)]
      write(all)
      return renamed
    },
    /** Removes a conversation of the user from the list; false when it is not theirs. */
    remove: (user: string, id: string): boolean => {
      const all = read()
      const list = all[user] ?? []
      if (!list.some((c) => c.id === id)) return false
      all[user] = list.filter((c) => c.id !== id)
      write(all)
      return true
    }
  }
}
