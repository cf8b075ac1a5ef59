// A small Markdown reader for answers (models write headings, lists, bold, italics and code), built as DOM
// elements and text nodes only: nothing of the answer is ever parsed as HTML, so a retrieved passage or a
// model that writes `<script>` or `<img onerror=...>` shows those characters and runs nothing.

type Piece = Node | string;
/** Turns plain text into nodes (e.g. `[chunk id]` citations into buttons). */
export type TextNodes = (text: string) => Piece[];

const INLINE = /(`[^`\n]+`|\*\*[^*\n]+\*\*|__[^_\n]+__|\*[^*\s][^*\n]*\*|_[^_\s][^_\n]*_)/;

function inline(text: string, plain: TextNodes): Piece[] {
  const out: Piece[] = [];
  text.split(INLINE).forEach((part, i) => {
    if (!part) return;
    if (i % 2 === 0) return void out.push(...plain(part));
    if (part.startsWith("`")) return void out.push(el("code", [part.slice(1, -1)]));
    const strong = part.startsWith("**") || part.startsWith("__");
    const inner = strong ? part.slice(2, -2) : part.slice(1, -1);
    out.push(el(strong ? "strong" : "em", inline(inner, plain)));
  });
  return out;
}

function el(tag: string, children: Piece[]): HTMLElement {
  const node = document.createElement(tag);
  node.append(...children);
  return node;
}

const HEADING = /^(#{1,6})\s+(.*)$/;
const BULLET = /^\s*[-*+]\s+(.*)$/;
const NUMBERED = /^\s*\d+[.)]\s+(.*)$/;
const FENCE = /^\s*```/;

/** The answer's Markdown as block elements (paragraphs, headings, lists, code blocks). */
export function markdown(text: string, plain: TextNodes = (t) => [t]): HTMLElement[] {
  const blocks: HTMLElement[] = [];
  let para: string[] = [];
  let list: { tag: "ul" | "ol"; el: HTMLElement } | null = null;
  let code: string[] | null = null;
  const flush = () => {
    if (para.length) {
      const children: Piece[] = [];
      para.forEach((line, i) => children.push(...(i ? [document.createElement("br")] : []), ...inline(line, plain)));
      blocks.push(el("p", children));
    }
    para = [];
    list = null;
  };
  for (const line of text.split(/\r?\n/)) {
    if (code) {
      if (FENCE.test(line)) {
        blocks.push(el("pre", [el("code", [code.join("\n")])]));
        code = null;
      } else code.push(line);
      continue;
    }
    if (FENCE.test(line)) {
      flush();
      code = [];
      continue;
    }
    const heading = HEADING.exec(line);
    const item = BULLET.exec(line) ?? NUMBERED.exec(line);
    if (!line.trim()) flush();
    else if (heading) {
      flush();
      blocks.push(el(`h${Math.min(6, heading[1].length + 2)}`, inline(heading[2], plain)));
    } else if (item) {
      const tag = BULLET.test(line) ? "ul" : "ol";
      if (para.length || !list || list.tag !== tag) {
        flush();
        list = { tag, el: el(tag, []) };
        blocks.push(list.el);
      }
      list.el.append(el("li", inline(item[1], plain)));
    } else {
      if (list) list = null;
      para.push(line);
    }
  }
  if (code) blocks.push(el("pre", [el("code", [code.join("\n")])]));
  flush();
  return blocks;
}
