"""Linear-chain CRF math in torch, as pure functions of the emission scores and
the start / transition / end parameters, so that the same code serves the CRF
head (learned parameters) and constrained decoding of a softmax tagger (zero
parameters, forbidden moves masked).

Shapes: emissions ``(B, T, K)``, ``mask`` ``(B, T)`` bool with each row's true
entries first (padding after), ``start``/``end`` ``(K,)``, ``transitions``
``(K, K)`` where ``[i, j]`` scores tag j following tag i. Every row needs at least
one real position.

Constraints enter as boolean tables (see `schemes.transition_constraints`):
forbidden moves get a score of `FORBIDDEN`, which is finite so that gradients
stay defined, yet so low that no forbidden path carries any probability mass in
float32 and the decoder never picks one while an allowed path exists.
"""
import math
from functools import partial
from typing import Callable, List, Optional

import torch

FORBIDDEN = -1.0e4
# step-matrix entries (B x positions x K x K) held at once by the recursions: 64 MB in float32
STEP_BUDGET = 2**24
# up to this many tags the recursions run in chunks of K x K x K products (see `_chain_block`)
CHUNKED_MAX_TAGS = 24
# chains up to this many steps run one step after another (see `_chain`)
SEQUENTIAL_MAX_STEPS = 512


def apply_constraints(
    start: torch.Tensor,
    transitions: torch.Tensor,
    end: torch.Tensor,
    allowed_start: Optional[torch.Tensor] = None,
    allowed_transitions: Optional[torch.Tensor] = None,
    allowed_end: Optional[torch.Tensor] = None,
):
    """The parameters with forbidden entries replaced by `FORBIDDEN`."""
    if allowed_start is not None:
        start = start.masked_fill(~allowed_start, FORBIDDEN)
    if allowed_transitions is not None:
        transitions = transitions.masked_fill(~allowed_transitions, FORBIDDEN)
    if allowed_end is not None:
        end = end.masked_fill(~allowed_end, FORBIDDEN)
    return start, transitions, end


def _forward_alphas(emissions, mask, start, transitions):
    """Forward algorithm: log-sum over paths ending in each tag at each row's
    last real position, ``(B, K)``."""
    alpha = start + emissions[:, 0]
    for t in range(1, emissions.shape[1]):
        step = torch.logsumexp(alpha.unsqueeze(2) + transitions, dim=1) + emissions[:, t]
        alpha = torch.where(mask[:, t : t + 1], step, alpha)
    return alpha


def crf_log_partition(emissions, mask, start, transitions, end) -> torch.Tensor:
    """log Z per sequence, ``(B,)``."""
    return torch.logsumexp(_forward_alphas(emissions, mask, start, transitions) + end, dim=1)


def crf_nll(emissions, tag_mask, mask, start, transitions, end) -> torch.Tensor:
    """Negative log-likelihood per sequence, ``(B,)``, of the gold tags.

    `tag_mask` ``(B, T, K)`` bool marks the tags each position may have: one per
    position for fully annotated data, all of them where the annotation is
    missing. The likelihood is then the mass of every path consistent with the
    annotation (the partial-label CRF), which is the gold path's probability when
    all positions are annotated.

    Both partitions run as one recursion over 2B rows: the recursion is a
    loop over positions of small tensor operations, so one loop instead of two
    halves its fixed costs (about a quarter of the loss's forward and backward
    for a training batch of 16 sentences), with the same values."""
    B = emissions.shape[0]
    clamped = emissions.masked_fill(~tag_mask, FORBIDDEN)
    log_z = crf_log_partition(torch.cat([emissions, clamped]), torch.cat([mask, mask]), start, transitions, end)
    return log_z[:B] - log_z[B:]


def _times(x: torch.Tensor, y: torch.Tensor, reduce) -> torch.Tensor:
    """Matrix product in the (reduce, +) semiring: x (..., I, J), y (..., J, L)
    -> (..., I, L); `reduce` is torch.logsumexp (sums of paths) or torch.amax
    (best path)."""
    return reduce(x.unsqueeze(-1) + y.unsqueeze(-3), dim=-2)


def _shifted(x: torch.Tensor, dims=(-1,)) -> torch.Tensor:
    """x moved to a maximum of 0 over `dims`: a constant per row of paths, which
    no marginal (normalised per position) and no argmax depends on."""
    return x - x.amax(dim=dims, keepdim=True)


def _identity(K: int, like: torch.Tensor) -> torch.Tensor:
    """The semiring's identity matrix: 0 on the diagonal, -inf elsewhere."""
    return torch.full((K, K), float("-inf"), dtype=like.dtype, device=like.device).fill_diagonal_(0.0)


def _chain_block(state: torch.Tensor, steps: torch.Tensor, reduce) -> torch.Tensor:
    """The states after each of `steps` ``(B, N, K, K)`` from `state` ``(B, K)``:
    s_t = s_{t-1} x steps[:, t - 1], as ``(B, N, K)``, each shifted by a
    constant of its own.

    For small tag sets, in chunks of about sqrt(N) steps rather than one step
    after another: the products of every prefix inside each chunk (all chunks at
    once), then the state entering each chunk (one chunk after another), then
    every state from its chunk's entry and prefix product (one product). About
    2 sqrt(N) sequential tensor operations instead of N, the same exact result;
    each one is a K x K x K product, which for large tag sets costs more than
    the steps it saves, so there the steps run one after another (`_chain_steps`)."""
    B, N, K, _ = steps.shape
    if K > CHUNKED_MAX_TAGS:
        return _chain_steps(state, steps, reduce)[:, 1:]
    size = math.isqrt(N - 1) + 1  # ceil(sqrt(N))
    n_chunks = -(-N // size)
    padded = torch.cat([steps, _identity(K, steps).expand(B, n_chunks * size - N, K, K)], dim=1)
    chunks = padded.view(B, n_chunks, size, K, K)
    prefix = torch.empty_like(chunks)
    product = chunks[:, :, 0]
    prefix[:, :, 0] = product
    for i in range(1, size):
        product = _shifted(_times(product, chunks[:, :, i], reduce), dims=(-2, -1))
        prefix[:, :, i] = product
    entries = torch.empty((B, n_chunks, K), dtype=steps.dtype, device=steps.device)
    for c in range(n_chunks):
        entries[:, c] = state
        state = _shifted(_times(state.unsqueeze(1), prefix[:, c, -1], reduce).squeeze(1))
    states = _times(entries[:, :, None, None, :], prefix, reduce).reshape(B, n_chunks * size, K)[:, :N]
    return _shifted(states)


def _chain(first: torch.Tensor, n_steps: int, steps_of: Callable[[int, int], torch.Tensor], reduce) -> torch.Tensor:
    """The states s_0 = first ``(B, K)``, s_t = s_{t-1} x M_t for t = 1..n_steps,
    as ``(B, n_steps + 1, K)``, each shifted by a constant of its own.
    `steps_of(lo, hi)` gives M_{lo+1}..M_{hi} ``(B, hi - lo, K, K)``; they are
    asked for a block at a time, so that at most about `STEP_BUDGET` step
    entries are held, however long the document and large the tag set."""
    B, K = first.shape
    block = max(1, STEP_BUDGET // (B * K * K))
    if n_steps <= min(block, SEQUENTIAL_MAX_STEPS):
        return _chain_steps(first, steps_of(0, n_steps), reduce)
    states = [_shifted(first).unsqueeze(1)]
    for lo in range(0, n_steps, block):
        states.append(_chain_block(states[-1][:, -1], steps_of(lo, min(lo + block, n_steps)), reduce))
    return torch.cat(states, dim=1)


def _chain_steps(first: torch.Tensor, steps: torch.Tensor, reduce) -> torch.Tensor:
    """`_chain` one step after another: N products of a (B, K) state by a K x K
    step, in the log domain. Chains up to `SEQUENTIAL_MAX_STEPS` steps come
    here when their scores are beyond `_probability_chains`' range (for them
    the chunks' K x K x K products would cost more than the steps they save),
    and the chunks of tag sets above `CHUNKED_MAX_TAGS`."""
    state = _shifted(first)
    states = [state]
    for t in range(steps.shape[1]):
        state = _shifted(_times(state.unsqueeze(1), steps[:, t], reduce).squeeze(1))
        states.append(state)
    return torch.stack(states, dim=1)


def _steps(emissions, mask, transitions, lo: int, hi: int) -> torch.Tensor:
    """The steps into positions lo + 1..hi, ``(B, hi - lo, K, K)``: [i, j] scores
    tag j at t after tag i at t - 1; at padding the identity (nothing changes)."""
    K = emissions.shape[2]
    steps = transitions + emissions[:, lo + 1 : hi + 1].unsqueeze(2)
    return torch.where(mask[:, lo + 1 : hi + 1, None, None], steps, _identity(K, steps))


def _probability_chains(emissions, mask, start, transitions, end):
    """`_forward_backward` one position after another, as products of
    probabilities: a step's matrix exp(transitions + emissions_t) is the
    product of exp(transitions), shared by every row and position, and the
    diagonal of exp(emissions_t), so a step is one (B, K) x (K, K) matrix
    product and a scaling (to a maximum of 1), where the log-domain step
    reduces a (B, K, K) tensor by logsumexp, and no (B, T, K, K) tensor is
    built. For a batch of sentences this is most of a CRF's decoding time.

    In float64, ratios down to e^-708 within a state or a step are kept; what
    is smaller counts as no path, as a forbidden move does (the log is floored
    at `FORBIDDEN`, so that no -inf reaches the marginals). If every entry of a
    state underflows (scores spanning more than float64 can scale), None: the
    caller runs the log-domain recursion."""
    B, T, K = emissions.shape
    em = emissions.double()
    weights = torch.exp(em - em.amax(dim=-1, keepdim=True))
    moves = torch.exp(transitions.double() - transitions.double().amax())
    real = mask.unsqueeze(2)
    first = start.double() + em[:, 0]
    alpha = torch.exp(first - first.amax(dim=-1, keepdim=True))
    alphas = [alpha]
    for t in range(1, T):
        step = (alpha @ moves) * weights[:, t]
        alpha = torch.where(real[:, t], step / step.amax(dim=-1, keepdim=True), alpha)
        alphas.append(alpha)
    # at padding beta stays at the end scores, up to each row's last real position
    beta = torch.exp(end.double() - end.double().amax()).expand(B, K)
    betas = [beta]
    for t in range(T - 2, -1, -1):
        step = (beta * weights[:, t + 1]) @ moves.T
        beta = torch.where(real[:, t + 1], step / step.amax(dim=-1, keepdim=True), beta)
        betas.append(beta)
    if bool(torch.isnan(alpha).any() | torch.isnan(beta).any()):  # 0 / 0 spreads through every later step
        return None
    return tuple(torch.log(torch.stack(x, dim=1)).clamp(min=FORBIDDEN).to(emissions.dtype)
                 for x in (alphas, betas[::-1]))


def _forward_backward(emissions, mask, start, transitions, end):
    """alpha ``(B, T, K)`` (log-sum of the paths up to t, ending in each tag) and
    beta ``(B, T, K)`` (of the paths after t, from each tag), each position
    shifted by a constant of its own (see `_chain`). Up to
    `SEQUENTIAL_MAX_STEPS` steps as products of probabilities
    (`_probability_chains`); longer chains, or scores beyond its range, in the
    log domain."""
    B, T, _ = emissions.shape
    n = T - 1
    if n <= SEQUENTIAL_MAX_STEPS:
        chains = _probability_chains(emissions, mask, start, transitions, end)
        if chains is not None:
            return chains

    def forward(lo, hi):
        return _steps(emissions, mask, transitions, lo, hi)

    def backward(lo, hi):  # the forward steps n - hi..n - lo, last first, transposed
        return forward(n - hi, n - lo).flip(1).transpose(-1, -2)

    alphas = _chain(start + emissions[:, 0], n, forward, torch.logsumexp)
    # beta_t = M_{t+1} beta_{t+1} from beta at the last real position = end: the same chain run
    # backwards; at padding the identity steps keep beta = end up to each row's last real position
    betas = _chain(end.expand(B, -1), n, backward, torch.logsumexp).flip(1)
    return alphas, betas


@torch.no_grad()
def crf_marginals(emissions, mask, start, transitions, end) -> torch.Tensor:
    """Per-position tag marginals ``(B, T, K)`` (zeros at padding), by the
    forward-backward algorithm (`_forward_backward`: its logs).

    alpha and beta carry a constant of their own at each position, which
    cancels in the marginal, alpha + beta normalised per position. So the values
    stay near 0 however long the document, and each row sums to 1 by
    construction. (As the gradient of an unnormalised float32 log Z through
    autograd, the magnitudes grew with the length until the differences that
    matter were lost: on a 100,000-token document rows summed to anything from
    0.12 to 1.05, and the 100,000-step graph took minutes.)"""
    alphas, betas = _forward_backward(emissions, mask, start, transitions, end)
    return torch.softmax(alphas + betas, dim=-1) * mask.unsqueeze(2)


def log_matmul(log_x: torch.Tensor, log_m: torch.Tensor) -> torch.Tensor:
    """log(exp(log_x) @ exp(log_m)) for log_x ``(..., I)``, log_m ``(I, J)``: the
    sum over paths through one step as a matrix product, each side moved to a
    maximum of 0 first (rows of log_x, columns of log_m), so that nothing
    overflows and no (..., I, J) tensor is built. Entries of -inf (moves ruled
    out) add nothing; a sum with no term is -inf."""
    x_max = log_x.amax(dim=-1, keepdim=True)
    x_max = torch.where(torch.isfinite(x_max), x_max, torch.zeros_like(x_max))
    m_max = log_m.amax(dim=0, keepdim=True)
    m_max = torch.where(torch.isfinite(m_max), m_max, torch.zeros_like(m_max))
    return torch.log(torch.exp(log_x - x_max) @ torch.exp(log_m - m_max)) + x_max + m_max


@torch.no_grad()
def crf_scaled_forward_backward(emissions, mask, start, transitions, end):
    """The forward-backward quantities with their scale, for probabilities of
    events longer than one position (`span_marginals.py`):

    * ``alpha_hat`` ``(B, T, K)``: log P(tag at t | the scores up to t), i.e.
      alpha_t - c_t with c_t = log-sum of alpha_t;
    * ``beta_hat`` ``(B, T, K)``: beta_t - (log Z - c_t), so that
      alpha_hat + beta_hat is the log marginal;
    * ``scale`` ``(B, T)``: c_t (cumulative, so c_e - c_{s-1} is the local
      normaliser of an event on positions s..e; its value at padding repeats
      the last real one);
    * ``log_z`` ``(B,)``.

    A span's probability is then alpha_hat before it, the path through it and
    beta_hat after it, less c_e - c_{s-1}: every term stays near 0 however long
    the document. The recursions run in the scores' dtype (each position
    shifted near 0, so float32 loses nothing that matters); everything after
    them is float64, since c itself grows with the length."""
    alphas, betas = (x.double() for x in _forward_backward(emissions, mask, start, transitions, end))
    emissions, start, transitions, end = (x.double() for x in (emissions, start, transitions, end))
    # x - logsumexp(x): torch's log_softmax over a short last axis takes about twice as long
    alpha_hat = alphas - torch.logsumexp(alphas, dim=-1, keepdim=True)
    log_marginals = alphas + betas
    beta_hat = log_marginals - torch.logsumexp(log_marginals, dim=-1, keepdim=True) - alpha_hat
    # c_t - c_{t-1}: the log-sum of one step from the normalised alpha_{t-1}
    steps = torch.logsumexp(log_matmul(alpha_hat[:, :-1], transitions) + emissions[:, 1:], dim=-1)
    first = torch.logsumexp(start + emissions[:, 0], dim=-1, keepdim=True)
    scale = torch.cumsum(torch.cat([first, steps.masked_fill(~mask[:, 1:], 0.0)], dim=1), dim=1)
    last = mask.sum(dim=1) - 1
    rows = torch.arange(emissions.shape[0], device=emissions.device)
    log_z = scale[rows, last] + torch.logsumexp(alpha_hat[rows, last] + end, dim=-1)
    return alpha_hat, beta_hat, scale, log_z


def _viterbi_steps(emissions, start, transitions):
    """The best score of a path ending in each tag at each position
    ``(B, T, K)`` and the back-pointers ``(B, T - 1, K)`` ([b, t, j]: the best
    tag at t before tag j at t + 1), one position after another, the pointers
    taken with the maxima. In float64, so that the scores need no shifting over
    `SEQUENTIAL_MAX_STEPS` positions. Past a row's last real position the
    values are of no use (the path is read back from that position)."""
    em = emissions.double()
    moves = transitions.double().T.unsqueeze(0)  # [j, i]: tag i, then tag j
    best = start.double() + em[:, 0]
    scores, pointers = [best], [em.new_zeros((em.shape[0], 0, em.shape[2]), dtype=torch.long)]
    for t in range(1, em.shape[1]):
        values, previous = (best.unsqueeze(1) + moves).max(dim=-1)
        best = values + em[:, t]
        scores.append(best)
        pointers.append(previous.unsqueeze(1))
    return torch.stack(scores, dim=1), torch.cat(pointers, dim=1)


def _chained_viterbi(emissions, mask, start, transitions):
    """`_viterbi_steps` for long chains: the scores by `_chain` in the max-plus
    semiring, then every back-pointer from them, a block of positions at a
    time (over the last axis: an argmax over an inner one is several times
    slower)."""
    B, T, K = emissions.shape
    best = _chain(start + emissions[:, 0], T - 1, partial(_steps, emissions, mask, transitions), torch.amax)
    block = max(1, STEP_BUDGET // (B * K * K))
    pointers = [(best[:, lo : lo + block].unsqueeze(2) + transitions.T).argmax(dim=3)  # [b, t, j, i]
                for lo in range(0, T - 1, block)]
    return best, torch.cat(pointers, dim=1)  # long chains only: at least one block


@torch.no_grad()
def crf_viterbi(emissions, mask, start, transitions, end) -> List[List[int]]:
    """Best tag path per sequence, cut to its real length: the best score of a
    path ending in each tag at each position and the back-pointers
    (`_viterbi_steps`, or `_chained_viterbi` past `SEQUENTIAL_MAX_STEPS`
    steps), then each path followed back on the host from its last real
    position (a pointer at a time in numpy: converting every pointer to a
    Python int first costs several times more)."""
    T = emissions.shape[1]
    lengths = mask.sum(dim=1).tolist()
    steps = _viterbi_steps if T - 1 <= SEQUENTIAL_MAX_STEPS else partial(_chained_viterbi, mask=mask)
    best, pointers = steps(emissions, start=start, transitions=transitions)
    rows = torch.arange(len(lengths), device=best.device)
    last = (best[rows, torch.tensor(lengths, device=best.device) - 1] + end.to(best.dtype)).argmax(dim=1).tolist()
    pointers = pointers.cpu().numpy()
    paths = []
    for row, n, tag in zip(pointers, lengths, last):
        path = [tag]
        for t in range(n - 2, -1, -1):
            tag = int(row[t, tag])
            path.append(tag)
        paths.append(path[::-1])
    return paths
