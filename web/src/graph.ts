// The retrieved subgraph, drawn with Cytoscape.js: seeds highlighted, edges labelled with their
// relation and score (thicker when more relevant), and a tap on a node expanding it one hop.
import cytoscape, { type Core, type ElementDefinition, type NodeSingular } from "cytoscape";
import type { GraphEdge, GraphNode } from "./evidence";

const MAX_FIT_ZOOM = 1.3;

const STYLE: cytoscape.StylesheetJson = [
  {
    selector: "node",
    style: {
      label: "data(label)",
      "font-size": 11,
      color: "#1f2933",
      "text-valign": "bottom",
      "text-margin-y": 4,
      "text-wrap": "ellipsis",
      "text-max-width": "140px",
      "background-color": "#7b93a8",
      width: 18,
      height: 18,
    },
  },
  { selector: "node.seed", style: { "background-color": "#f08c00", width: 22, height: 22 } },
  {
    selector: "node.top",
    style: { "background-color": "#e8590c", "border-width": 4, "border-color": "#ffc078", width: 30, height: 30, "font-weight": "bold", "font-size": 13 },
  },
  { selector: "node.hop", style: { "background-color": "#b3c3d1" } },
  { selector: "node:selected", style: { "border-width": 3, "border-color": "#1c7ed6" } },
  {
    selector: "edge",
    style: {
      label: "data(text)",
      "font-size": 9,
      color: "#52606d",
      "text-rotation": "autorotate",
      "text-background-color": "#ffffff",
      "text-background-opacity": 0.8,
      "curve-style": "bezier",
      "target-arrow-shape": "triangle",
      "line-color": "#9aa5b1",
      "target-arrow-color": "#9aa5b1",
      width: "mapData(weight, 0, 1, 1, 5)",
    },
  },
  { selector: "edge.hop", style: { "line-style": "dashed" } },
];

function edgeText(e: GraphEdge): string {
  if (e.score !== undefined) return `${e.label} · ${e.score.toFixed(2)}`;
  return e.weight !== undefined && e.weight !== 1 ? `${e.label} ×${e.weight}` : e.label;
}

/** 0-1 for the edge's width: its score, else its support on a log scale. */
function strength(e: GraphEdge): number {
  if (e.score !== undefined) return Math.max(0, Math.min(1, e.score));
  return e.weight !== undefined ? Math.min(1, Math.log2(1 + e.weight) / 4) : 0.3;
}

function elements(nodes: GraphNode[], edges: GraphEdge[], hop: boolean): ElementDefinition[] {
  const classes = (n: GraphNode) => [n.seed ? "seed" : "", n.top ? "top" : "", hop ? "hop" : ""].join(" ").trim();
  return [
    ...nodes.map((n) => ({ group: "nodes" as const, data: { id: n.id, label: n.label, score: n.score }, classes: classes(n) })),
    ...edges.map((e) => ({
      group: "edges" as const,
      data: {
        id: `${e.source}\u0000${e.predicate}\u0000${e.target}`,
        source: e.source,
        target: e.target,
        predicate: e.predicate,
        text: edgeText(e),
        weight: strength(e),
      },
      classes: hop ? "hop" : "",
    })),
  ];
}

/** The graph panel. `onTap` is called with a node's id and label when it is tapped. */
export class GraphView {
  readonly cy: Core;

  constructor(container: HTMLElement, onTap: (id: string, label: string) => void) {
    this.cy = cytoscape({ container, style: STYLE, minZoom: 0.2, maxZoom: 3, wheelSensitivity: 0.3 });
    this.cy.on("tap", "node", (ev) => onTap(ev.target.id(), ev.target.data("label")));
  }

  /** Replace the picture with a new subgraph. */
  show(nodes: GraphNode[], edges: GraphEdge[]): void {
    this.cy.elements().remove();
    const ids = new Set(nodes.map((n) => n.id));
    this.cy.add(elements(nodes, edges.filter((e) => ids.has(e.source) && ids.has(e.target)), false));
    this.layout();
  }

  /** Add what one hop from a node found (nodes already drawn keep their place and marks). */
  expand(nodes: GraphNode[], edges: GraphEdge[]): number {
    const fresh = nodes.filter((n) => this.cy.getElementById(n.id).empty());
    const ids = new Set([...this.cy.nodes().map((n) => n.id()), ...fresh.map((n) => n.id)]);
    const known = new Set(this.cy.edges().map((e) => e.id()));
    const drawable = edges.filter((e) => ids.has(e.source) && ids.has(e.target));
    const added = elements(fresh, drawable, true).filter((el) => el.group === "nodes" || !known.has(String(el.data.id)));
    this.cy.add(added);
    this.layout();
    return fresh.length;
  }

  /** Relabel nodes whose labels arrived after they were drawn. */
  relabel(labels: Map<string, string>): void {
    for (const [id, label] of labels) {
      const n = this.cy.getElementById(id);
      if (n.nonempty()) n.data("label", label);
    }
  }

  /** The node of `id`, if it is drawn. */
  node(id: string): NodeSingular | null {
    const n = this.cy.getElementById(id);
    return n.nonempty() && n.isNode() ? n : null;
  }

  private layout(): void {
    const n = this.cy.nodes().length;
    const name = n > 120 ? "concentric" : "cose";
    this.cy.layout({ name, animate: false, fit: true, padding: 30, nodeDimensionsIncludeLabels: true } as cytoscape.LayoutOptions).run();
    if (this.cy.zoom() > MAX_FIT_ZOOM) {
      this.cy.zoom(MAX_FIT_ZOOM); // a handful of nodes would otherwise fill the panel with giant labels
      this.cy.center();
    }
  }
}
