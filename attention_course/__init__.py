"""Helpers the course notebooks share: the data set, plots and the widget explorer.

Needs only what Colab preinstalls (torch, numpy, matplotlib, ipywidgets).
"""
