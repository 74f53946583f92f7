// The text a model sees of an MCP tool result, and the tool source reference stored on a call's record.
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"

type ContentPart = CallToolResult["content"][number]

const partText = (part: ContentPart): string => {
  switch (part.type) {
    case "text":
      return part.text
    case "image":
    case "audio":
      return `[${part.type} ${part.mimeType}, ${part.data.length} base64 characters]`
    case "resource_link":
      return `[resource ${part.uri}${part.name ? ` (${part.name})` : ""}]`
    case "resource": {
      const resource = part.resource
      return "text" in resource && typeof resource.text === "string"
        ? resource.text
        : `[resource ${resource.uri}${resource.mimeType ? `, ${resource.mimeType}` : ""}]`
    }
    default:
      return JSON.stringify(part)
  }
}

/**
 * The output text of a result: its content parts, one per line (binary parts named, not inlined), or its
 * structured content as JSON when it has no content.
 */
export const resultText = (result: CallToolResult): string => {
  const parts = (result.content ?? []).map(partText)
  if (parts.length > 0) return parts.join("\n")
  if (result.structuredContent !== undefined) return JSON.stringify(result.structuredContent)
  return ""
}

/** What a call's record keeps to find its server and tool again without a listing. */
export const ToolReference = Schema.Struct({
  server: Schema.String,
  tool: Schema.String,
  taskSupport: Schema.Literals(["forbidden", "optional", "required"])
})

export type ToolReference = typeof ToolReference.Type

const ReferenceJson = Schema.fromJsonString(ToolReference)

export const encodeReference = (reference: ToolReference): string => Schema.encodeSync(ReferenceJson)(reference)

/** The reference stored on a record, or none for text this source did not write. */
export const decodeReference = (text: string | null | undefined): Option.Option<ToolReference> =>
  text == null ? Option.none() : Schema.decodeUnknownOption(ReferenceJson)(text)
