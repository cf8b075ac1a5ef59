"""query"""
