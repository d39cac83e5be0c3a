"""An independent NumPy implementation of the ELMo biLM, written from the equations in DESIGN.md.

It works one sentence at a time, on the released hdf5 arrays, with an explicit per-step loop: no batching,
no padding, no reversal tricks. Used to check the Keras layers where the bilm-tf fixture does not reach
(skip connections, tanh activation, the backward direction with padding, layer norm in ScalarMix).
"""

from __future__ import annotations

import numpy as np

BOS, EOS, BOW, EOW, PAD = 256, 257, 258, 259, 260


def char_ids(token: str, max_chars: int = 50) -> np.ndarray:
    data = list(token.encode("utf-8"))[: max_chars - 2]
    ids = [BOW] + data + [EOW] + [PAD] * (max_chars - 2 - len(data))
    return np.array(ids) + 1


def boundary_ids(char: int, max_chars: int = 50) -> np.ndarray:
    return np.array([BOW, char, EOW] + [PAD] * (max_chars - 3)) + 1


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def token_embedding(ids: np.ndarray, w: dict, options: dict) -> np.ndarray:
    """ids [50] -> [projection_dim]."""
    cnn = options["char_cnn"]
    table = np.vstack([np.zeros((1, w["char_embed"].shape[1])), w["char_embed"]])
    chars = table[ids]  # [50, d]
    feats = []
    for i, (width, num) in enumerate(cnn["filters"]):
        kernel = w[f"CNN/W_cnn_{i}"][0]  # [width, d, num]
        best = np.full(num, -np.inf)
        for start in range(len(ids) - width + 1):
            window = chars[start : start + width]  # [width, d]
            value = np.einsum("wd,wdn->n", window, kernel) + w[f"CNN/b_cnn_{i}"]
            best = np.maximum(best, value)
        feats.append(np.maximum(best, 0) if cnn["activation"] == "relu" else np.tanh(best))
    x = np.concatenate(feats)
    for k in range(cnn["n_highway"]):
        g = sigmoid(x @ w[f"CNN_high_{k}/W_carry"] + w[f"CNN_high_{k}/b_carry"])
        t = np.maximum(x @ w[f"CNN_high_{k}/W_transform"] + w[f"CNN_high_{k}/b_transform"], 0)
        x = g * t + (1 - g) * x
    if "CNN_proj/W_proj" in w:
        x = x @ w["CNN_proj/W_proj"] + w["CNN_proj/b_proj"]
    return x


def lstm_direction(xs: np.ndarray, w: dict, options: dict, direction: int) -> list[np.ndarray]:
    """xs [n, P] in reading order of this direction -> per layer outputs [n, P]."""
    lstm = options["lstm"]
    d, p = lstm["dim"], lstm["projection_dim"]
    outputs = []
    layer_in = xs
    for k in range(lstm["n_layers"]):
        prefix = f"RNN_{direction}/RNN/MultiRNNCell/Cell{k}/LSTMCell"
        kernel, bias, proj = w[f"{prefix}/W_0"], w[f"{prefix}/B"], w[f"{prefix}/W_P_0"]
        c, h = np.zeros(d), np.zeros(p)
        outs = []
        for x in layer_in:
            z = np.concatenate([x, h]) @ kernel + bias
            i, j, f, o = np.split(z, 4)
            c = sigmoid(f + 1.0) * c + sigmoid(i) * np.tanh(j)
            if lstm.get("cell_clip"):
                c = np.clip(c, -lstm["cell_clip"], lstm["cell_clip"])
            h = (sigmoid(o) * np.tanh(c)) @ proj
            if lstm.get("proj_clip"):
                h = np.clip(h, -lstm["proj_clip"], lstm["proj_clip"])
            outs.append(h + x if (lstm.get("use_skip_connections") and k > 0) else h)
        layer_in = np.array(outs)
        outputs.append(layer_in)
    return outputs


def bilm_sentence(tokens: list[str], w: dict, options: dict, boundaries: bool = True) -> list[np.ndarray]:
    """One sentence, zero initial state -> n_layers + 1 arrays [n_tokens, 2P] (boundaries stripped)."""
    w = {k: np.asarray(v, dtype=np.float64) for k, v in w.items()}
    max_chars = options["char_cnn"]["max_characters_per_token"]
    ids = [char_ids(t, max_chars) for t in tokens]
    if boundaries:
        ids = [boundary_ids(BOS, max_chars)] + ids + [boundary_ids(EOS, max_chars)]
    emb = np.array([token_embedding(i, w, options) for i in ids])
    fwd = lstm_direction(emb, w, options, 0)
    bwd = [out[::-1] for out in lstm_direction(emb[::-1], w, options, 1)]
    layers = [np.concatenate([emb, emb], axis=1)]
    layers += [np.concatenate([f, b], axis=1) for f, b in zip(fwd, bwd)]
    return [layer[1:-1] for layer in layers] if boundaries else layers


def scalar_mix(layers: list[np.ndarray], mask: np.ndarray, logits, gamma: float, layer_norm: bool) -> np.ndarray:
    """AllenNLP ScalarMix on a batch: layers [B, T, D] each, mask [B, T]."""
    s = np.exp(logits - np.max(logits))
    s = s / s.sum()
    total = 0.0
    m = mask[..., None].astype(np.float64)
    for weight, h in zip(s, layers):
        if layer_norm:
            n = m.sum() * h.shape[-1]
            mean = (h * m).sum() / n
            var = (((h - mean) * m) ** 2).sum() / n
            h = (h - mean) / np.sqrt(var + 1e-12)
        total = total + weight * h
    return gamma * total
