// The map's words in English and in the seed's Traditional Chinese. Each
// element names its Kubernetes term and the island's.

const en = {
  title: "Cloud Island: the whole map of how Kubernetes works, live",
  village: "① Lighthouse village · control plane",
  whistle: "Whistle · kubectl",
  counter: "Lighthouse counter · API server",
  tree: "Memory tree · the store (Raft, etcd's role)",
  picker: "Tree-picker · scheduler",
  captain: "Patrol captain · controllers",
  nests: "② Nest trees · nodes (boards)",
  squirrel: "Butler squirrel · kubelet",
  runtime: "runtime",
  plugins: "Plug-ins",
  gates: "③ Gates and roads · network",
  gatekeeper: "Gatekeeper · Ingress controller",
  roads: "Road manager · Service data plane",
  ingress: "Gate map board · Ingress",
  service: "Totem pole · Service",
  slice: "Name list · EndpointSlice",
  ground: "④ Ground · storage",
  pvcs: "Borrowing slips · PersistentVolumeClaims",
  pvs: "Warehouses · PersistentVolumes",
  pod: "Bubble · Pod",
  container: "Bird · container",
  legendBlue: "Blue: components working through the API server",
  legendOrange: "Orange: packets (Ingress → Service → Pod); moving while a pod receives traffic",
  legendGrey: "Grey dashed: API relations",
  legendGreen: "Green: data read and written on volumes",
  deletePod: "Delete this pod",
  close: "Close",
  lang: "中文",
  langName: "zh-Hant",
  ready: "Ready", notReady: "not ready", gone: "gone dark (NotReady)",
  leader: "leader", follower: "follower", learner: "learner", down: "not heard from",
  term: "term", commit: "commit", keys: "keys", revision: "revision", log: "log in memory",
  quorum: "quorum", noQuorum: "NO QUORUM: writes wait",
  pending: "pending", pendingNone: "no pod waits for a board",
  acted: "acted", noStore: "the store is shown to those who may list Nodes",
  noNodes: "boards are shown to those who may list Nodes; these are where your pods are",
  lighthouseDark: "The lighthouse is dark: no API server answers. The boards keep running their pods; the map shows what it saw last.",
  reconnecting: "Reconnecting to the API server…",
  user: "You are", allNs: "all namespaces", nsOnly: "namespaces",
  cpu: "CPU", memory: "memory", arch: "architecture", pods: "pods", addresses: "addresses",
  node: "board", phase: "phase", ip: "Pod IP (CNI)", volumes: "volumes (CSI)", containers: "containers",
  clusterIP: "cluster IP", ports: "ports", endpoints: "ready endpoints", rules: "rules", class: "class",
  capacity: "capacity", status: "status", claim: "claim", storageClass: "storage class", reclaim: "reclaim policy",
  deleted: "deleted", forbidden: "not allowed", none: "none",
  wrote: (who, what) => `${who} wrote ${what}`,
  scheduled: (pod, node) => `${pod} was placed on ${node}`,
  started: (pod) => `${pod} is running`,
  boardDark: (b) => `board ${b} went dark`,
  boardBack: (b) => `board ${b} is back`,
};

const zh = {
  title: "雲之島全圖：一張圖看懂 Kubernetes 怎麼運作（即時）",
  village: "① 左上燈塔村（控制平面 / Control Plane）",
  whistle: "吹哨子（kubectl）",
  counter: "燈塔櫃台（API Server）",
  tree: "記憶樹（儲存：Raft，etcd 的角色）",
  picker: "選樹官（Scheduler）",
  captain: "巡邏隊長（Controller Manager）",
  nests: "② 島中央巢樹（工作節點 / Node）",
  squirrel: "管家松鼠（kubelet）",
  runtime: "容器執行階段",
  plugins: "外掛擴充機制",
  gates: "③ 右側出入口與通路（網路與服務抽象）",
  gatekeeper: "守門員（Ingress Controller）",
  roads: "道路管理員（kube-proxy 的角色）",
  ingress: "大門地圖看板（Ingress）",
  service: "圖騰柱（Service）",
  slice: "名單切片（EndpointSlice）",
  ground: "④ 地面儲存區（持久化儲存 / Storage）",
  pvcs: "借用單（PersistentVolumeClaim，PVC）",
  pvs: "倉庫（PersistentVolume，PV）",
  pod: "泡泡（Pod）",
  container: "小鳥（Container）",
  legendBlue: "藍色箭頭：元件透過 API Server 協作",
  legendOrange: "橘色箭頭：封包流量（Ingress → Service → Pod）；Pod 收到流量時流動",
  legendGrey: "灰色虛線：API 資源關係",
  legendGreen: "綠色雙向箭頭：volume 資料讀寫",
  deletePod: "刪除這個泡泡 Pod",
  close: "關閉",
  lang: "English",
  langName: "en",
  ready: "就緒", notReady: "未就緒", gone: "熄燈（NotReady）",
  leader: "領導者", follower: "跟隨者", learner: "學習者", down: "失聯",
  term: "任期", commit: "提交", keys: "鍵", revision: "版本", log: "記憶體中的日誌",
  quorum: "法定人數", noQuorum: "沒有法定人數：寫入等待中",
  pending: "待排程", pendingNone: "沒有等待節點的 Pod",
  acted: "已行動", noStore: "可列出 Node 的使用者才看得到記憶樹",
  noNodes: "可列出 Node 的使用者才看得到巢樹；這裡是你的 Pod 所在之處",
  lighthouseDark: "燈塔熄了：沒有 API Server 回應。巢樹上的 Pod 仍繼續執行；地圖顯示最後看到的狀態。",
  reconnecting: "正在重新連線到 API Server…",
  user: "你是", allNs: "所有 namespace", nsOnly: "namespace",
  cpu: "CPU", memory: "記憶體", arch: "架構", pods: "Pod", addresses: "位址",
  node: "巢樹", phase: "階段", ip: "Pod IP（CNI）", volumes: "磁區（CSI）", containers: "容器",
  clusterIP: "Cluster IP", ports: "連接埠", endpoints: "就緒端點", rules: "規則", class: "類別",
  capacity: "容量", status: "狀態", claim: "借用單", storageClass: "StorageClass", reclaim: "回收策略",
  deleted: "已刪除", forbidden: "沒有權限", none: "無",
  wrote: (who, what) => `${who} 寫入 ${what}`,
  scheduled: (pod, node) => `${pod} 被安排到 ${node}`,
  started: (pod) => `${pod} 開始執行`,
  boardDark: (b) => `巢樹 ${b} 熄燈了`,
  boardBack: (b) => `巢樹 ${b} 回來了`,
};

const langs = { en, "zh-Hant": zh };
let current = en;

// setLang switches the words (en or zh-Hant) and relabels the page.
export function setLang(name) {
  current = langs[name] || en;
  document.documentElement.lang = name in langs ? name : "en";
  for (const el of document.querySelectorAll("[data-t]")) el.textContent = current[el.dataset.t];
}

// t is the word for key, called with args if it is a phrase.
export function t(key, ...args) {
  const v = current[key] ?? en[key] ?? key;
  return typeof v === "function" ? v(...args) : v;
}

export function langOf() { return current === zh ? "zh-Hant" : "en"; }
