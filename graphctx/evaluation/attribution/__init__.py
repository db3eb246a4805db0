"""Attributed answers (Bohnet et al., 2022, Attributed QA): every answer paired with one passage of a fixed
attribution corpus, chosen by an architecture and judged by AutoAIS on that passage alone."""
