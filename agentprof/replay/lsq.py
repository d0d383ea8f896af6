"""A small damped Gauss-Newton (Levenberg-Marquardt) least-squares solver in numpy.

The calibration fits a handful of parameters per configuration; a dependency-free solver with a finite
difference Jacobian is fast enough (milliseconds per fit) and keeps scipy out of the install.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def least_squares(fun: Callable[[np.ndarray], np.ndarray], x0: np.ndarray, max_iter: int = 80,
                  tol: float = 1e-9, step: float = 1e-6) -> tuple[np.ndarray, float]:
    """Minimize ``sum(fun(x)**2)`` from ``x0``; returns ``(x, cost)``.

    Levenberg-Marquardt with Marquardt scaling: the damping grows on a rejected step and shrinks on an
    accepted one; stops when the relative cost decrease falls below ``tol``.
    """
    x = np.asarray(x0, dtype=float).copy()
    r = fun(x)
    cost = float(r @ r)
    lam = 1e-3
    n = x.size
    eye = np.eye(n)
    for _ in range(max_iter):
        jac = np.empty((r.size, n))
        for j in range(n):
            xp = x.copy()
            h = step * max(1.0, abs(x[j]))
            xp[j] += h
            jac[:, j] = (fun(xp) - r) / h
        g = jac.T @ r
        a = jac.T @ jac
        diag = np.diag(a).copy()
        diag[diag <= 0] = 1.0
        improved = False
        for _ in range(12):
            try:
                dx = np.linalg.solve(a + lam * np.diag(diag) + 1e-12 * eye, -g)
            except np.linalg.LinAlgError:
                lam *= 10
                continue
            xn = x + dx
            rn = fun(xn)
            cn = float(rn @ rn)
            if np.isfinite(cn) and cn < cost:
                rel = (cost - cn) / max(cost, 1e-300)
                x, r, cost = xn, rn, cn
                lam = max(lam / 5, 1e-9)
                improved = True
                break
            lam *= 8
        if not improved or rel < tol:
            break
    return x, cost
