"""Issue 26 item 8: error messages say what is wrong and what works instead."""
import numpy as np
import pandas as pd
import pytest

import querycompute as qc


def test_no_field_over_dataframe_lists_the_tables_columns():
    # The columns a query reads are narrowed (column_use.py); a name that is no column keeps
    # them all, so the message lists the table's columns, not only the ones the lambda read.
    df = pd.DataFrame({"price": np.arange(4.0), "qty": np.arange(4), "tax": np.ones(4)})
    with pytest.raises(qc.UnsupportedLambdaError, match="no field 'prise'; fields: price, qty, tax"):
        qc.query(df).select(lambda r: r.price * r.prise).to_array()
